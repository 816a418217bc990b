/**
 * Where `infir2 up` starts its server: the port of TEMPORAL_ADDRESS (where every other verb looks) unless
 * `--port` says the same or TEMPORAL_ADDRESS is unset; an address on another host, or one that disagrees with
 * `--port`, is refused with one line naming both.
 */
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../src/errors.js';
import { addressHint, upPort } from '../../../src/cli/up-address.js';

const refusal = (f: () => unknown): string => {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(UsageError);
    return (err as Error).message;
  }
  throw new Error('expected a UsageError');
};

describe('upPort', () => {
  it.each([
    [undefined, undefined, 7233],
    ['7301', undefined, 7301],
    [undefined, '127.0.0.1:17411', 17411],
    [undefined, 'localhost:17411', 17411],
    ['17411', '127.0.0.1:17411', 17411],
    [undefined, '  ', 7233],
  ])('--port %s, TEMPORAL_ADDRESS %s → %i', (flag, env, port) => {
    expect(upPort(flag, env)).toBe(port);
  });

  it('refuses a TEMPORAL_ADDRESS on another machine, saying what to do instead', () => {
    expect(refusal(() => upPort(undefined, 'temporal.example:7233'))).toMatch(/^TEMPORAL_ADDRESS=temporal\.example:7233 is not this machine: .*unset TEMPORAL_ADDRESS.*infir2 worker/);
  });

  it('refuses a --port that disagrees with TEMPORAL_ADDRESS', () => {
    expect(refusal(() => upPort('7301', '127.0.0.1:17411'))).toBe(
      '--port 7301 disagrees with TEMPORAL_ADDRESS=127.0.0.1:17411, which the other verbs use: drop --port, or set TEMPORAL_ADDRESS=127.0.0.1:7301',
    );
  });

  it('refuses a TEMPORAL_ADDRESS without a port', () => {
    expect(refusal(() => upPort(undefined, '127.0.0.1'))).toBe("TEMPORAL_ADDRESS: expected host:port (e.g. 127.0.0.1:7233), got '127.0.0.1'");
  });
});

describe('addressHint', () => {
  it('tells the other verbs where a server on another port is, unless TEMPORAL_ADDRESS already does', () => {
    expect(addressHint('127.0.0.1:7301', undefined)).toBe('for the other verbs: export TEMPORAL_ADDRESS=127.0.0.1:7301');
    expect(addressHint('127.0.0.1:7301', '127.0.0.1:7301')).toBeNull();
    expect(addressHint('127.0.0.1:7233', undefined)).toBeNull();
  });
});
