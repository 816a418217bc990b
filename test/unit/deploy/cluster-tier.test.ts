/**
 * The cluster tier (test/cluster, `make test-cluster`) runs docker-compose.yml's control plane for real; these
 * checks run in `make test` and fail when the compose file drifts from what the tier relies on, so that the tier
 * keeps testing what compose runs instead of silently testing something else.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../integration/harness.js';
import { composeEnv, composeServices, hostPathOf, jobScript, pinnedServerVersion, resolveComposeValue } from '../../cluster/harness.js';

const tmp = mkdtempSync(join(tmpdir(), 'infir2-cluster-tier-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('the cluster tier and docker-compose.yml', () => {
  it('resolves compose variables as compose does with nothing exported', () => {
    expect(resolveComposeValue('${POSTGRES_USER:-temporal}')).toBe('temporal');
    expect(resolveComposeValue('${X-dflt}/${Y}')).toBe('dflt/');
    expect(resolveComposeValue('pg_isready -U "$${POSTGRES_USER}"')).toBe('pg_isready -U "${POSTGRES_USER}"');
  });

  it('builds the server release the compose file pins: setup-cluster.sh reads the same tag as the harness', () => {
    const script = readFileSync(join(ROOT, 'scripts/setup-cluster.sh'), 'utf8');
    const sed = /version=\$\(sed -n '([^']+)' docker-compose\.yml/.exec(script)?.[1];
    expect(sed, 'setup-cluster.sh reads the version with sed from docker-compose.yml').toBeDefined();
    const fromScript = execFileSync('sed', ['-n', sed!, join(ROOT, 'docker-compose.yml')], { encoding: 'utf8' }).trim().split('\n')[0];
    expect(fromScript).toBe(pinnedServerVersion());
    expect(composeServices().temporal?.image).toBe(`temporalio/server:${pinnedServerVersion()}`);
  });

  it('overrides only settings the compose services really have (the database address, the dynamic config path)', () => {
    const server = composeEnv('temporal');
    const schema = composeEnv('temporal-schema');
    for (const k of ['POSTGRES_SEEDS', 'DB_PORT', 'POSTGRES_USER', 'POSTGRES_PWD', 'DB']) {
      expect(server[k], `temporal: ${k}`).toBeTruthy();
      expect(schema[k], `temporal-schema: ${k}`).toBe(server[k]);
    }
    for (const k of ['BIND_ON_IP', 'DYNAMIC_CONFIG_FILE_PATH']) expect(server[k], `temporal: ${k}`).toBeTruthy();
    expect(composeEnv('temporal-setup').TEMPORAL_ADDRESS).toBeTruthy();
    // The PostgreSQL superuser the harness creates is the one the server and the schema job log in as.
    expect(composeEnv('postgresql').POSTGRES_USER).toBe(server.POSTGRES_USER);
    expect(composeEnv('postgresql').POSTGRES_PASSWORD).toBe(server.POSTGRES_PWD);
    expect(readFileSync(hostPathOf('temporal', server.DYNAMIC_CONFIG_FILE_PATH!), 'utf8')).toMatch(/limit\.maxIDLength/);
  });

  it('runs the compose jobs\' own scripts, found through their bind mounts', () => {
    expect(jobScript('temporal-schema')).toBe(join(ROOT, 'deploy/temporal/setup-postgres.sh'));
    expect(jobScript('temporal-setup')).toBe(join(ROOT, 'deploy/temporal/setup-temporal.sh'));
  });

  it('setup-postgres.sh takes the schema directory from TEMPORAL_SCHEMA_DIR (the tier\'s copy of the release\'s schema)', () => {
    const calls = join(tmp, 'calls');
    const bin = mkdtempSync(join(tmp, 'bin-'));
    execFileSync('/bin/sh', ['-c', `printf '#!/bin/sh\\necho "$*" >> ${calls}\\n' > ${bin}/temporal-sql-tool && chmod +x ${bin}/temporal-sql-tool`]);
    execFileSync('/bin/sh', [jobScript('temporal-schema')], {
      env: { PATH: `${bin}:/usr/bin:/bin`, ...composeEnv('temporal-schema'), POSTGRES_SEEDS: '127.0.0.1', DB_PORT: '15432', TEMPORAL_SCHEMA_DIR: '/cache/schema/postgresql/v12' },
    });
    const lines = readFileSync(calls, 'utf8').trim().split('\n');
    expect(lines).toContain('--plugin postgres12 --ep 127.0.0.1 -u temporal -p 15432 --db temporal update-schema -d /cache/schema/postgresql/v12/temporal/versioned');
    expect(lines).toContain('--plugin postgres12 --ep 127.0.0.1 -u temporal -p 15432 --db temporal_visibility update-schema -d /cache/schema/postgresql/v12/visibility/versioned');
  });
});
