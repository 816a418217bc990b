/** Versions as pip orders them, and the requirements `software.versions` writes. */
import { describe, expect, it } from 'vitest';
import { compareVersions, parseRequirement, parseVersion, satisfies } from '../../../src/recipe/version-spec.js';

const cmp = (a: string, b: string) => compareVersions(parseVersion(a)!, parseVersion(b)!);

describe('versions', () => {
  it.each([
    ['2.0.0.dev0', '2.0.0a1'],
    ['2.0.0a1', '2.0.0rc1'],
    ['2.0.0rc1', '2.0.0'],
    ['2.0.0', '2.0.0.post1'],
    ['2.7.4', '2.7.4.post1'],
    ['2.7.4.post1', '2.8.0'],
    ['1.13.0a0+gitunknown', '1.13'],
    ['12.8', '12.9'],
    ['12.9', '12.10'],
    ['9.0', '10.0'],
  ])('%s < %s', (a, b) => {
    expect(cmp(a, b)).toBe(-1);
    expect(cmp(b, a)).toBe(1);
  });

  it('reads what packages report', () => {
    expect(parseVersion('2.11.0+cu130')).toMatchObject({ release: [2, 11, 0], local: 'cu130' });
    expect(parseVersion('2.4.0+3cd6870')).toMatchObject({ release: [2, 4, 0], local: '3cd6870' });
    expect(parseVersion('1.13.0a0+gitunknown')).toMatchObject({ release: [1, 13, 0], pre: [0, 0], local: 'gitunknown' });
    expect(parseVersion('not a version')).toBeNull();
  });
});

describe('requirements', () => {
  it.each([
    ['==2.4.0', '2.4.0+3cd6870', true], // a local label is ignored unless the requirement names one
    ['==2.4.0+3cd6870', '2.4.0+3cd6870', true],
    ['==2.4.0+3cd6870', '2.4.0+abcdef0', false],
    ['2.7.4.post1', '2.7.4.post1', true], // a bare version is ==
    ['>=2.4, <2.8', '2.7.4.post1', true],
    ['>=2.4, <2.8', '2.8.0', false],
    ['<2', '1.26.4', true],
    ['<2', '2.0.0rc1', false], // PEP 440: `<2` does not admit 2's own pre-releases
    ['>=2.0.0.dev0', '2.0.0rc1', true],
    ['>=1.13', '1.13.0a0+gitunknown', false], // Debian's torch is a pre-release of 1.13
    ['>=1.13.0a0', '1.13.0a0+gitunknown', true],
    ['==2.4.*', '2.4.1', true],
    ['==2.4.*', '2.5.0', false],
    ['!=2.4.*', '2.5.0', true],
    ['<9.0', '8.9', true],
    ['>=10.0', '9.0', false],
  ])('%s with %s: %s', (req, v, ok) => {
    expect(satisfies(req, { version: v }).ok).toBe(ok);
  });

  it('checks a commit against a checkout\'s HEAD or a wheel\'s label, either abbreviated', () => {
    expect(satisfies('@3cd6870', { version: '2.4.0+3cd6870', commits: ['3cd6870'] }).ok).toBe(true);
    expect(satisfies('@3cd6870ce', { version: null, commits: ['3cd6870'] }).ok).toBe(true);
    expect(satisfies('@23e00ed', { version: '0.14.0', commits: ['23e00ed0963c35382dfe8a5a94fb3cda4d21e133'] }).ok).toBe(true);
    expect(satisfies('==0.14.0, @23e00ed', { version: '0.14.0', commits: ['ea651a3b78'] })).toMatchObject({ ok: false, failed: ['@23e00ed'] });
    // Nothing to tell it by: unknown, not false.
    expect(satisfies('==0.14.0, @23e00ed', { version: '0.14.0', commits: [] })).toMatchObject({ ok: null, unknown: ['@23e00ed'] });
    expect(satisfies('>=2', { version: null })).toMatchObject({ ok: null });
  });

  it('says what is wrong with one that is not', () => {
    expect(parseRequirement('')).toMatch(/^not a version requirement/);
    expect(parseRequirement('>=2.4,')).toMatch(/^not a version requirement/);
    expect(parseRequirement('>=2.4, >=x')).toBe("'>=x': 'x' is not a version (expected e.g. 2.4.0, 2.7.4.post1, 12.9)");
    expect(parseRequirement('>= two')).toMatch(/'two' is not a version/);
    expect(parseRequirement('@xyz')).toMatch(/expected @ and a commit/);
    expect(parseRequirement('>=2.4.*')).toMatch(/goes with == or != only/);
    expect(parseRequirement('>=2.4, <2.8, @3cd6870')).toHaveLength(3);
  });
});
