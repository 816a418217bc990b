/**
 * Static checks of the cluster deployment (docker-compose.yml, Dockerfile, .dockerignore, deploy/): no Docker
 * engine runs here, so the files are parsed and cross-checked against the code they must agree with, and the
 * one-shot setup scripts run against fake `temporal` / `temporal-sql-tool` programs.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ORCHESTRATOR_TASK_QUEUE, SA, SEARCH_ATTRIBUTE_FLAGS } from '../../../src/temporal/constants.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const read = (p: string) => readFileSync(join(ROOT, p), 'utf8');

interface Service {
  image?: string;
  build?: string | { context?: string; dockerfile?: string };
  depends_on?: string[] | Record<string, { condition?: string }>;
  environment?: Record<string, string | number | boolean | null> | string[];
  ports?: (string | { target: number; published?: string | number })[];
  volumes?: (string | { type?: string; source?: string; target: string })[];
  entrypoint?: string | string[];
  command?: string | string[];
  healthcheck?: { test?: string | string[]; disable?: boolean };
  restart?: string;
}
interface Compose {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
}

// Compose understands YAML merge keys (`<<: *anchor`); so must the parser.
const compose = parse(read('docker-compose.yml'), { merge: true }) as Compose;
const services = Object.entries(compose.services);
const svc = (name: string): Service => {
  const s = compose.services[name];
  if (!s) throw new Error(`docker-compose.yml has no service '${name}'`);
  return s;
};

function env(s: Service): Record<string, string> {
  if (!s.environment) return {};
  if (Array.isArray(s.environment)) {
    return Object.fromEntries(s.environment.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
  }
  return Object.fromEntries(Object.entries(s.environment).map(([k, v]) => [k, v == null ? '' : String(v)]));
}
const dependsOn = (s: Service): Record<string, string> =>
  Array.isArray(s.depends_on)
    ? Object.fromEntries(s.depends_on.map((d) => [d, 'service_started']))
    : Object.fromEntries(Object.entries(s.depends_on ?? {}).map(([k, v]) => [k, v.condition ?? 'service_started']));
const argv = (x: string | string[] | undefined): string[] => (x === undefined ? [] : Array.isArray(x) ? x : x.split(/\s+/).filter(Boolean));

/** `HOST:CONTAINER[/proto]`, `IP:HOST:CONTAINER` or the long form, as {host, container}. */
function ports(s: Service): { host: number; container: number }[] {
  return (s.ports ?? []).map((p) => {
    if (typeof p !== 'string') return { host: Number(p.published ?? p.target), container: p.target };
    const parts = p.replace(/\/(tcp|udp)$/, '').split(':');
    const container = Number(parts.at(-1));
    return { host: parts.length > 1 ? Number(parts.at(-2)) : container, container };
  });
}

/** Volume entries as {source, target, named}; a source starting with `.` or `/` is a bind mount. */
function mounts(s: Service): { source: string; target: string; named: boolean }[] {
  return (s.volumes ?? []).map((v) => {
    if (typeof v !== 'string') return { source: v.source ?? '', target: v.target, named: v.type === 'volume' };
    const [source = '', target = ''] = v.split(':');
    return { source, target, named: !/^[./~]/.test(source) && target !== '' };
  });
}

/** An image reference `repo[:tag][@digest]` split; the tag is what follows the last `:` after the last `/`. */
function imageTag(image: string): { repo: string; tag: string | null; digest: string | null } {
  const [ref = '', digest = null] = image.split('@');
  const slash = ref.lastIndexOf('/');
  const colon = ref.lastIndexOf(':');
  return colon > slash ? { repo: ref.slice(0, colon), tag: ref.slice(colon + 1), digest } : { repo: ref, tag: null, digest };
}

/** A pinned tag names a release: not `latest`, not empty, not a variable, and has a version number in it. */
function pinned(image: string): boolean {
  const { tag, digest } = imageTag(image);
  if (digest) return true;
  return !!tag && tag !== 'latest' && !tag.includes('$') && /\d/.test(tag);
}

const pkg = JSON.parse(read('package.json')) as { version: string };

describe('docker-compose.yml', () => {
  it('parses, and holds the control plane: PostgreSQL, Temporal, the schema and setup jobs, the UI, the orchestrator', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['orchestrator', 'postgresql', 'temporal', 'temporal-schema', 'temporal-setup', 'ui']);
  });

  it('pins every image to an exact version, or builds it from this repository', () => {
    for (const [name, s] of services) {
      if (s.build) {
        const b = typeof s.build === 'string' ? { context: s.build } : s.build;
        expect(b.context ?? '.', name).toBe('.');
        expect(existsSync(join(ROOT, b.dockerfile ?? 'Dockerfile')), name).toBe(true);
        // The built image gets a name of its own, tagged with the package version (never `latest`).
        if (s.image) expect(s.image, name).toBe(`infir2:${pkg.version}`);
        continue;
      }
      expect(s.image, `${name} has neither image nor build`).toBeTruthy();
      expect(pinned(s.image!), `${name}: ${s.image} is not pinned`).toBe(true);
    }
  });

  it('runs the current Temporal layout: server + admin-tools of one release (auto-setup is deprecated), and a Web UI', () => {
    const images = services.map(([, s]) => s.image ?? '');
    expect(images.some((i) => i.startsWith('temporalio/auto-setup'))).toBe(false);
    const server = imageTag(svc('temporal').image!);
    expect(server.repo).toBe('temporalio/server');
    for (const job of ['temporal-schema', 'temporal-setup']) {
      const tools = imageTag(svc(job).image!);
      expect(tools.repo, job).toBe('temporalio/admin-tools');
      // The schema the admin-tools image applies is the schema its server release expects.
      expect(tools.tag, job).toBe(server.tag);
    }
    expect(imageTag(svc('ui').image!).repo).toBe('temporalio/ui');
    expect(imageTag(svc('postgresql').image!).repo).toBe('postgres');
  });

  it('depends only on services that exist, with conditions those services can meet', () => {
    for (const [name, s] of services) {
      for (const [dep, condition] of Object.entries(dependsOn(s))) {
        expect(compose.services[dep], `${name} depends on unknown service '${dep}'`).toBeDefined();
        expect(['service_started', 'service_healthy', 'service_completed_successfully'], `${name} → ${dep}`).toContain(condition);
        const target = compose.services[dep]!;
        if (condition === 'service_healthy') {
          expect(target.healthcheck?.test, `${name} waits for ${dep} to be healthy, but ${dep} has no healthcheck`).toBeTruthy();
        }
        if (condition === 'service_completed_successfully') {
          // A one-shot job: compose must not restart it, or `up` waits on a container that never completes.
          expect(target.restart ?? 'no', `${dep} is a one-shot job`).toBe('no');
        }
      }
    }
  });

  it('starts in order: database → schema → server → namespace and search attributes → orchestrator', () => {
    expect(dependsOn(svc('temporal-schema'))).toEqual({ postgresql: 'service_healthy' });
    expect(dependsOn(svc('temporal'))).toEqual({ 'temporal-schema': 'service_completed_successfully' });
    expect(dependsOn(svc('temporal-setup'))).toEqual({ temporal: 'service_healthy' });
    expect(dependsOn(svc('ui'))).toMatchObject({ temporal: 'service_healthy' });
    // Workflows set the search attributes on start: the orchestrator waits until they are registered.
    expect(dependsOn(svc('orchestrator'))).toEqual({ temporal: 'service_healthy', 'temporal-setup': 'service_completed_successfully' });
    // Long-lived services come back after a crash or a reboot.
    for (const name of ['postgresql', 'temporal', 'ui', 'orchestrator']) expect(svc(name).restart, name).toBe('unless-stopped');
  });

  it('declares every named volume it uses (and uses every one it declares); PostgreSQL data is on one', () => {
    const declared = Object.keys(compose.volumes ?? {});
    const used = new Set<string>();
    for (const [name, s] of services) {
      for (const m of mounts(s)) {
        if (!m.named) continue;
        expect(declared, `${name} mounts undeclared volume '${m.source}'`).toContain(m.source);
        used.add(m.source);
      }
    }
    expect([...used].sort()).toEqual([...declared].sort());
    const data = mounts(svc('postgresql')).find((m) => m.target === '/var/lib/postgresql/data');
    expect(data?.named, 'PostgreSQL data must be on a named volume').toBe(true);
  });

  it('bind-mounts only paths of this repository, and each job runs a script that the mount provides', () => {
    for (const [name, s] of services) {
      for (const m of mounts(s)) {
        if (m.named) continue;
        expect(m.source.startsWith('./'), `${name}: ${m.source} must be relative to the repository`).toBe(true);
        expect(existsSync(join(ROOT, m.source)), `${name}: ${m.source} does not exist`).toBe(true);
      }
    }
    for (const job of ['temporal-schema', 'temporal-setup']) {
      const ep = argv(svc(job).entrypoint);
      const script = ep.find((a) => a.endsWith('.sh'));
      expect(script, job).toBeDefined();
      const m = mounts(svc(job)).find((x) => script!.startsWith(`${x.target}/`));
      expect(m, `${job}: ${script} is not under a mount`).toBeDefined();
      const local = join(ROOT, m!.source, posix.relative(m!.target, script!));
      expect(existsSync(local), `${job}: ${local}`).toBe(true);
      // admin-tools is Alpine: busybox sh, no bash.
      expect(ep[0]).toBe('/bin/sh');
      expect(readFileSync(local, 'utf8').startsWith('#!/bin/sh\n')).toBe(true);
    }
  });

  it('publishes gRPC 7233 and the UI on 8080, each host port once', () => {
    const all = services.flatMap(([name, s]) => ports(s).map((p) => ({ name, ...p })));
    const hostPorts = all.map((p) => p.host);
    expect(new Set(hostPorts).size).toBe(hostPorts.length);
    expect(ports(svc('temporal'))).toEqual([{ host: 7233, container: 7233 }]);
    expect(ports(svc('ui'))).toEqual([{ host: 8080, container: 8080 }]);
    // The database and the worker are reachable only inside the compose network.
    expect(ports(svc('postgresql'))).toEqual([]);
    expect(ports(svc('orchestrator'))).toEqual([]);
  });

  it('points every client at the temporal service on the port the server listens on', () => {
    const serverPort = ports(svc('temporal'))[0]!.container;
    for (const name of ['temporal-setup', 'ui', 'orchestrator']) {
      const address = env(svc(name)).TEMPORAL_ADDRESS;
      expect(address, `${name}: TEMPORAL_ADDRESS`).toBe(`temporal:${serverPort}`);
    }
    // The server's own healthcheck probes the same port.
    expect(argv(svc('temporal').healthcheck!.test).join(' ')).toContain(String(serverPort));
    // Every client uses the namespace that temporal-setup prepares.
    const ns = env(svc('temporal-setup')).TEMPORAL_NAMESPACE;
    expect(ns).toBeTruthy();
    expect(env(svc('orchestrator')).TEMPORAL_NAMESPACE).toBe(ns);
    expect(env(svc('ui')).TEMPORAL_DEFAULT_NAMESPACE).toBe(ns);
  });

  it('gives the server and the schema job the same PostgreSQL settings, and the server a dynamic config that exists', () => {
    const keys = ['DB', 'DB_PORT', 'POSTGRES_SEEDS', 'POSTGRES_USER', 'POSTGRES_PWD'];
    const server = env(svc('temporal'));
    const schema = env(svc('temporal-schema'));
    for (const k of keys) {
      expect(server[k], k).toBeTruthy();
      expect(schema[k], k).toBe(server[k]);
    }
    expect(server.DB).toBe('postgres12');
    expect(compose.services[server.POSTGRES_SEEDS!]).toBe(svc('postgresql'));
    expect(server.POSTGRES_USER).toBe(env(svc('postgresql')).POSTGRES_USER);
    expect(server.POSTGRES_PWD).toBe(env(svc('postgresql')).POSTGRES_PASSWORD);
    const dc = server.DYNAMIC_CONFIG_FILE_PATH!;
    const m = mounts(svc('temporal')).find((x) => dc.startsWith(`${x.target}/`));
    expect(m, `${dc} is not under a mount`).toBeDefined();
    const local = join(ROOT, m!.source, posix.relative(m!.target, dc));
    expect(parse(readFileSync(local, 'utf8'))).toBeTypeOf('object');
  });

  it('registers exactly the search attributes of src/temporal/constants.ts', () => {
    const listed = env(svc('temporal-setup')).INFIR2_SEARCH_ATTRIBUTES!.split(/\s+/).filter(Boolean);
    expect([...listed].sort()).toEqual([...SEARCH_ATTRIBUTE_FLAGS].sort());
    // And with the names the workflows and the Web UI filters use.
    expect(listed.map((p) => p.split('=')[0]).sort()).toEqual(Object.values(SA).map((k) => k.name).sort());
  });

  it('runs the orchestrator worker: `node bin/infir2.js worker` with no pool, so it serves only the workflows', () => {
    const o = svc('orchestrator');
    const cmd = [...argv(o.entrypoint), ...argv(o.command)];
    expect(cmd.slice(0, 3)).toEqual(['node', 'bin/infir2.js', 'worker']);
    // --pool/--task-queue would add activities (trainers) to this container; --no-workflows would leave nothing.
    expect(cmd.filter((a) => /^--(pool|task-queue|no-workflows)\b/.test(a))).toEqual([]);
    expect(ORCHESTRATOR_TASK_QUEUE).toBe('infir2-orchestrator');
  });
});

describe('Dockerfile', () => {
  const text = read('Dockerfile');
  const lines = text.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  const froms = lines.filter((l) => /^FROM\s/i.test(l)).map((l) => l.split(/\s+/));
  const stages = froms.map((f) => (f[2]?.toUpperCase() === 'AS' ? f[3] : undefined)).filter(Boolean);

  it('builds on an exactly pinned Node 20 image', () => {
    expect(froms.length).toBeGreaterThan(0);
    for (const f of froms) {
      const image = f[1]!;
      if (stages.includes(image)) continue;
      expect(pinned(image), image).toBe(true);
      expect(image, 'node:20.<minor>.<patch>-<variant>').toMatch(/^node:20\.\d+\.\d+(-[a-z0-9.-]+)?$/);
    }
    // One base for build and runtime: the native Temporal bridge is installed for that base.
    expect(new Set(froms.map((f) => f[1]).filter((i) => !stages.includes(i))).size).toBe(1);
  });

  it('installs the locked dependencies without npm ci, and builds with scripts/build.sh (tsc + workflow bundle)', () => {
    expect(text).toMatch(/COPY package\.json package-lock\.json/);
    const install = lines.find((l) => /npm install/.test(l));
    expect(install).toMatch(/npm install --no-audit --no-fund/);
    expect(lines.join('\n')).not.toMatch(/npm ci\b/);
    expect(text).toMatch(/RUN bash scripts\/build\.sh/);
    // What build.sh must produce for the worker to start polling at once.
    expect(text).toMatch(/test -f dist\/cli\/main\.js/);
    expect(text).toMatch(/test -f dist\/workflow-bundle\.js/);
    const build = read('scripts/build.sh');
    expect(build).toMatch(/tsc -p tsconfig\.json/);
    expect(build).toMatch(/writePrebuiltBundle/);
  });

  it('runs the CLI as its entrypoint', () => {
    const ep = lines.find((l) => l.startsWith('ENTRYPOINT'));
    expect(JSON.parse(ep!.slice('ENTRYPOINT'.length))).toEqual(['node', 'bin/infir2.js']);
    // The compose file repeats it, so that the worker command reads in one place.
    expect(argv(svc('orchestrator').entrypoint)).toEqual(['node', 'bin/infir2.js']);
  });

  it('copies only paths that exist and that .dockerignore lets through', () => {
    const ignored = read('.dockerignore').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
    const sources = lines
      .filter((l) => /^COPY\s/.test(l) && !/--from=/.test(l))
      .flatMap((l) => l.split(/\s+/).slice(1, -1).filter((a) => !a.startsWith('--')));
    expect(sources.length).toBeGreaterThan(0);
    for (const src of sources) {
      expect(existsSync(join(ROOT, src)), src).toBe(true);
      const top = src.replace(/^\.\//, '').split('/')[0];
      expect(ignored, `${src} is excluded by .dockerignore`).not.toContain(top);
    }
  });
});

describe('.dockerignore', () => {
  it('keeps host builds, environments and run state out of the build context', () => {
    const ignored = read('.dockerignore').split('\n').map((l) => l.trim());
    for (const p of ['node_modules', 'dist', '.venv', 'runs', '.infir2']) expect(ignored, p).toContain(p);
  });
});

describe('GPU worker examples', () => {
  it('the systemd unit runs `infir2 worker --pool <instance>` and outlasts the kill grace on stop', () => {
    const unit = read('deploy/infir2-worker@.service');
    const exec = unit.split('\n').find((l) => l.startsWith('ExecStart='))!;
    expect(exec).toMatch(/bin\/infir2\.js worker --pool %i\b/);
    expect(exec).toMatch(/--gpus \$\{INFIR2_GPUS\}/);
    expect(exec).toMatch(/--kill-grace \$\{INFIR2_KILL_GRACE\}/);
    expect(unit).toMatch(/^KillMode=mixed$/m);
    const stop = Number(/^TimeoutStopSec=(\d+)$/m.exec(unit)![1]);
    const grace = Number(/^Environment=INFIR2_KILL_GRACE=(\d+)$/m.exec(unit)![1]);
    // The worker's own shutdown takes the kill grace plus 15 s (src/workers/pool-worker.ts).
    expect(stop).toBeGreaterThan(grace + 15);
  });

  it('hands INFIR2_CODEC_KEY to the orchestrator worker (empty: no encryption), and the example names it for the GPU workers', () => {
    expect(env(svc('orchestrator')).INFIR2_CODEC_KEY).toBe('${INFIR2_CODEC_KEY:-}');
    expect(read('deploy/gpu-worker.env.example')).toMatch(/^#INFIR2_CODEC_KEY=$/m);
  });

  it('the environment example points at the compose host on the published gRPC port', () => {
    const lines = read('deploy/gpu-worker.env.example').split('\n').filter((l) => /^[A-Z][A-Z0-9_]*=/.test(l));
    const vars = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
    expect(vars.TEMPORAL_ADDRESS).toMatch(/^[^:\s]+:7233$/);
    expect(vars.TEMPORAL_NAMESPACE).toBe(env(svc('temporal-setup')).TEMPORAL_NAMESPACE!.replace(/^\$\{TEMPORAL_NAMESPACE:-(.*)\}$/, '$1'));
    expect(vars.INFIR2_GPUS).toMatch(/^\d+(,\d+)*$/);
    const grace = Number(vars.INFIR2_KILL_GRACE);
    const stop = Number(/^TimeoutStopSec=(\d+)$/m.exec(read('deploy/infir2-worker@.service'))![1]);
    expect(stop).toBeGreaterThan(grace + 15);
  });
});

/* ---------- the setup scripts, run against fake admin tools ---------- */

const tmp = mkdtempSync(join(tmpdir(), 'infir2-deploy-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const FAKE_TEMPORAL = `#!/bin/sh
# A stand-in for the temporal CLI: state in $FAKE_STATE, every call appended to $FAKE_STATE/calls.
echo "$*" >> "$FAKE_STATE/calls"
while [ $# -gt 0 ]; do
  case "$1" in
    --address) shift 2 ;;
    *) break ;;
  esac
done
case "$1 $2 $3" in
  "operator cluster health") [ ! -f "$FAKE_STATE/down" ] ;;
  "operator namespace describe") [ -f "$FAKE_STATE/namespace" ] ;;
  "operator namespace create") touch "$FAKE_STATE/namespace" ;;
  "operator search-attribute list")
    printf '            Name               Type\\n  WorkflowId                 Keyword\\n'
    cat "$FAKE_STATE/attributes" 2>/dev/null; true ;;
  "operator search-attribute create")
    name=; type=
    while [ $# -gt 0 ]; do
      case "$1" in --name) name=$2; shift ;; --type) type=$2; shift ;; esac
      shift
    done
    printf '  %-26s %s\\n' "$name" "$type" >> "$FAKE_STATE/attributes" ;;
  "workflow list --namespace"|"workflow list -n") true ;;
  *) echo "fake temporal: unexpected: $*" >&2; exit 64 ;;
esac
`;

function fakeBin(name: string, body: string): string {
  const dir = mkdtempSync(join(tmp, 'bin-'));
  const file = join(dir, name);
  writeFileSync(file, body);
  chmodSync(file, 0o755);
  return dir;
}

const setupEnv = env(svc('temporal-setup'));
const namespaceOf = (v: string) => v.replace(/^\$\{[A-Z_]+:-(.*)\}$/, '$1');

/** Busybox, when installed: the shell and tools of the Alpine-based admin-tools image. */
const BUSYBOX = ['/usr/bin/busybox', '/bin/busybox'].find((p) => existsSync(p));

/** A directory whose awk, tr, date, ... are busybox's, so a run sees what it sees in admin-tools. */
function busyboxBin(): string {
  const dir = mkdtempSync(join(tmp, 'busybox-'));
  for (const tool of ['sh', 'awk', 'tr', 'date', 'sleep', 'cat', 'touch', 'printf', 'tail', 'echo']) symlinkSync(BUSYBOX!, join(dir, tool));
  return dir;
}

function runSetup(state: string, extra: Record<string, string> = {}, shell: 'sh' | 'busybox' = 'sh') {
  const bin = fakeBin('temporal', FAKE_TEMPORAL);
  const path = shell === 'busybox' ? `${bin}:${busyboxBin()}` : `${bin}:${process.env.PATH}`;
  const r = spawnSync(shell === 'busybox' ? BUSYBOX! : '/bin/sh', [...(shell === 'busybox' ? ['sh'] : []), join(ROOT, 'deploy/temporal/setup-temporal.sh')], {
    encoding: 'utf8',
    env: {
      PATH: path,
      FAKE_STATE: state,
      TEMPORAL_ADDRESS: setupEnv.TEMPORAL_ADDRESS!,
      TEMPORAL_NAMESPACE: namespaceOf(setupEnv.TEMPORAL_NAMESPACE!),
      TEMPORAL_NAMESPACE_RETENTION: namespaceOf(setupEnv.TEMPORAL_NAMESPACE_RETENTION!),
      INFIR2_SEARCH_ATTRIBUTES: setupEnv.INFIR2_SEARCH_ATTRIBUTES!,
      POLL_SECONDS: '0',
      ...extra,
    },
  });
  const calls = existsSync(join(state, 'calls')) ? readFileSync(join(state, 'calls'), 'utf8').trim().split('\n') : [];
  return { code: r.status, out: `${r.stdout}${r.stderr}`, calls };
}

describe('deploy/temporal/setup-temporal.sh (the search-attribute job)', () => {
  it('creates the namespace and registers every attribute with its type on a fresh server', () => {
    const state = mkdtempSync(join(tmp, 'fresh-'));
    const r = runSetup(state);
    expect(r.code, r.out).toBe(0);
    expect(r.calls.some((c) => c.includes('operator namespace create -n default --retention 30d'))).toBe(true);
    const creates = r.calls.filter((c) => c.includes('search-attribute create')).map((c) => {
      const m = /--name (\S+) --type (\S+)/.exec(c)!;
      return `${m[1]}=${m[2]}`;
    });
    expect(creates.sort()).toEqual([...SEARCH_ATTRIBUTE_FLAGS].sort());
    for (const c of r.calls) expect(c.startsWith(`--address ${setupEnv.TEMPORAL_ADDRESS}`), c).toBe(true);
    // It ends by proving that a list query naming every attribute is accepted. The names are backquoted: the
    // query parser reads `Precision` as an SQL keyword ("invalid search attribute: precision") otherwise.
    const query = r.calls.find((c) => c.includes('workflow list'))!;
    for (const k of Object.values(SA)) expect(query).toContain(`\`${k.name}\` = `);
  });

  it('is idempotent: a second run creates nothing', () => {
    const state = mkdtempSync(join(tmp, 'again-'));
    expect(runSetup(state).code).toBe(0);
    rmSync(join(state, 'calls'));
    const r = runSetup(state);
    expect(r.code, r.out).toBe(0);
    expect(r.calls.filter((c) => /create/.test(c))).toEqual([]);
    expect(r.out).toMatch(/RecipeName \(Keyword\) already registered/);
  });

  it('stops with a clear error when an attribute exists with another type', () => {
    const state = mkdtempSync(join(tmp, 'clash-'));
    writeFileSync(join(state, 'namespace'), '');
    writeFileSync(join(state, 'attributes'), '  Stage                      Keyword\n');
    const r = runSetup(state);
    expect(r.code).not.toBe(0);
    expect(r.out).toMatch(/Stage is registered as Keyword on namespace default, infir2 needs KeywordList/);
  });

  it.skipIf(!BUSYBOX)('runs the same under busybox sh and tools (the admin-tools image is Alpine)', () => {
    const state = mkdtempSync(join(tmp, 'busybox-state-'));
    const first = runSetup(state, {}, 'busybox');
    expect(first.code, first.out).toBe(0);
    expect(first.calls.filter((c) => c.includes('search-attribute create'))).toHaveLength(SEARCH_ATTRIBUTE_FLAGS.length);
    const again = runSetup(state, {}, 'busybox');
    expect(again.code, again.out).toBe(0);
    expect(again.out).toMatch(/Stage \(KeywordList\) already registered/);
  });

  it('gives up, failing, when the server never answers', () => {
    const state = mkdtempSync(join(tmp, 'down-'));
    writeFileSync(join(state, 'down'), '');
    const r = runSetup(state, { WAIT_SECONDS: '1' });
    expect(r.code).not.toBe(0);
    expect(r.out).toMatch(/gave up after 1s waiting for: the Temporal server at temporal:7233/);
  });
});

describe('deploy/temporal/setup-postgres.sh (the schema job)', () => {
  it('creates both databases and applies the versioned schemas, through temporal-sql-tool', () => {
    const state = mkdtempSync(join(tmp, 'sql-'));
    const bin = fakeBin('temporal-sql-tool', `#!/bin/sh\necho "$*" >> "${state}/calls"\necho "SQL_PASSWORD=$SQL_PASSWORD" >> "${state}/env"\n`);
    const schemaEnv = env(svc('temporal-schema'));
    const resolved = Object.fromEntries(Object.entries(schemaEnv).map(([k, v]) => [k, v.replace(/^\$\{[A-Z_]+:-(.*)\}$/, '$1')]));
    const out = execFileSync('/bin/sh', [join(ROOT, 'deploy/temporal/setup-postgres.sh')], {
      encoding: 'utf8',
      env: { PATH: `${bin}:${process.env.PATH}`, ...resolved },
    });
    expect(out).toMatch(/done/);
    const calls = readFileSync(join(state, 'calls'), 'utf8').trim().split('\n');
    const common = '--plugin postgres12 --ep postgresql -u temporal -p 5432';
    const dir = '/etc/temporal/schema/postgresql/v12';
    expect(calls).toEqual([
      `${common} --db temporal create`,
      `${common} --db temporal create`,
      `${common} --db temporal setup-schema -v 0.0`,
      `${common} --db temporal update-schema -d ${dir}/temporal/versioned`,
      `${common} --db temporal_visibility create`,
      `${common} --db temporal_visibility setup-schema -v 0.0`,
      `${common} --db temporal_visibility update-schema -d ${dir}/visibility/versioned`,
    ]);
    expect(readFileSync(join(state, 'env'), 'utf8')).toMatch(/^SQL_PASSWORD=temporal$/m);
  });

  it('are readable by the admin-tools user and parse as POSIX sh', () => {
    for (const f of ['deploy/temporal/setup-postgres.sh', 'deploy/temporal/setup-temporal.sh']) {
      expect(statSync(join(ROOT, f)).mode & 0o004, f).toBeTruthy();
      expect(spawnSync('/bin/sh', ['-n', join(ROOT, f)]).status, f).toBe(0);
    }
  });
});

describe('docs/cluster.md', () => {
  const doc = read('docs/cluster.md');

  it('names the images, ports and search attributes that docker-compose.yml uses', () => {
    for (const [name, s] of services) if (s.image) expect(doc, `${name}: ${s.image}`).toContain(s.image);
    for (const [, s] of services) for (const p of ports(s)) expect(doc).toContain(String(p.host));
    for (const k of Object.values(SA)) expect(doc).toContain(k.name);
    expect(doc).toContain(ORCHESTRATOR_TASK_QUEUE);
  });

  it('uses only verbs that the CLI has', () => {
    const main = read('src/cli/main.ts');
    const verbs = new Set([...main.matchAll(/^ {2}'?([a-z-]+)'?: \{(?: load: |\n\s+load: )/gm)].map((m) => m[1]));
    expect(verbs.size).toBe(18);
    // In prose: `infir2 verb`, bin/infir2 verb; in a code block also a line that starts with it (after VAR=value settings).
    const blocks = [...doc.matchAll(/^```[^\n]*\n([\s\S]*?)^```/gm)].map((m) => m[1]!).join('\n');
    const used = new Set([
      ...[...doc.matchAll(/(?:bin\/infir2(?:\.js)?|`infir2|\$ infir2) ([a-z][a-z-]*[a-z])\b/g)].map((m) => m[1]!),
      ...[...blocks.matchAll(/^\s*(?:[A-Z_]+=\S+\s+)*infir2 ([a-z][a-z-]*[a-z])\b/gm)].map((m) => m[1]!),
    ]);
    for (const v of used) expect(verbs, `docs/cluster.md uses \`infir2 ${v}\``).toContain(v);
    expect(used.size).toBeGreaterThan(5);
  });
});
