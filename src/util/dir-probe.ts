/**
 * Can a directory a user names (a run directory, a report's --out, INFIR2_HOME, INFIR2_HOST_DIR) take our files?
 * Checked in bounded time, and the directory made without Node's recursive mkdir: `mkdirSync('/proc/x/y',
 * { recursive: true })` never returns (it retries the ENOENT that /proc answers forever), which made
 * `infir2 run --set runDir=/proc/x`, `report --out /proc/x` and `INFIR2_HOME=/proc/x infir2 up` spin with no output.
 */
import { existsSync, lstatSync, mkdirSync, opendirSync, readFileSync, readlinkSync, rmdirSync, rmSync, statfsSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';

/** File systems that hold no files of ours (statfs f_type magic numbers, linux/magic.h). */
const PSEUDO_FS: Record<number, string> = {
  0x9fa0: 'proc',
  0x62656572: 'sysfs',
  0x1cd1: 'devpts',
  0x27e0eb: 'cgroup',
  0x63677270: 'cgroup2',
  0x64626720: 'debugfs',
  0x74726163: 'tracefs',
  0x73636673: 'securityfs',
  0xcafe4a11: 'bpf',
  0x6e736673: 'nsfs',
};

/** The errors a probe can meet, in words. */
const ERRNO_WORDS: Record<string, string> = {
  EROFS: 'read-only file system',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  ENOSPC: 'no space left on the device',
  EDQUOT: 'disk quota exceeded',
  ENOTDIR: 'a path component is not a directory',
  ENOENT: 'it cannot be created there',
};

export function errnoWords(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return (code && ERRNO_WORDS[code]) ?? (err instanceof Error ? err.message.split('\n')[0]! : String(err));
}

/** The deepest existing directory on the way to `dir`, and the components still to create below it. */
function existingAncestor(dir: string): { base: string; missing: string[] } {
  let base = resolve(dir);
  const missing: string[] = [];
  while (!existsSync(base) && dirname(base) !== base) {
    missing.unshift(base.slice(dirname(base).length).replace(/^\//, ''));
    base = dirname(base);
  }
  return { base, missing };
}

/**
 * Why `dir` can never hold files (one line: its nearest existing ancestor is not a directory, or is on a pseudo
 * file system where mkdir would spin), or null. Reads only: cheap enough for every CLI call.
 */
export function dirShapeProblem(dir: string, holds = 'a run'): string | null {
  const { base } = existingAncestor(dir);
  let st;
  try {
    st = statSync(base);
  } catch (err) {
    return `${base}: ${errnoWords(err)}`;
  }
  if (!st.isDirectory()) return `${base} is not a directory`;
  const fsType = PSEUDO_FS[Number(statfsSync(base).type)];
  if (fsType) return `${base} is on the ${fsType} pseudo file system, which cannot hold ${holds}`;
  return null;
}

/**
 * Why `dir` cannot hold a run (one line), or null when it can: its shape, then a probe file written and removed,
 * then the room left. `holds` names what would go there in the message (a run directory, a report's output).
 */
export function dirProblem(dir: string, holds = 'a run'): string | null {
  const shape = dirShapeProblem(dir, holds);
  if (shape) return shape;
  const { base } = existingAncestor(dir);
  // Root passes every permission check but not a read-only mount or a full disk: write a file to know.
  // Created exclusively under an unguessable name: a link planted at a guessable one would be written through.
  const probe = join(base, `.infir2-probe-${process.pid}-${randomBytes(6).toString('hex')}`);
  try {
    writeFileSync(probe, 'probe\n', { flag: 'wx' });
  } catch (err) {
    return `${base} is not writable: ${errnoWords(err)}`;
  } finally {
    try {
      unlinkSync(probe);
    } catch {
      /* not written */
    }
  }
  const fs = statfsSync(base);
  if (Number(fs.bavail) * Number(fs.bsize) === 0) return `${base}: no space left on the device`;
  return null;
}

/** Create `dir` one level at a time (never Node's recursive mkdir: see above); returns what it created. */
export function makeDirs(dir: string): string[] {
  const { base, missing } = existingAncestor(dir);
  const created: string[] = [];
  let p = base;
  for (const name of missing) {
    p = join(p, name);
    mkdirSync(p);
    created.push(p);
  }
  return created;
}

/** Undo a start that failed: the files it wrote, then the directories it created, deepest first, if empty. */
export function undoMakeDirs(files: string[], created: string[]): void {
  for (const f of files) rmSync(f, { force: true });
  for (const d of [...created].reverse()) {
    try {
      rmdirSync(d);
    } catch {
      return; // not empty: someone else's files are there
    }
  }
}

/** Written by `report` and `compare` into their output directory: a directory holding it may be written over by them. */
export const PAGE_MARKER = '.infir2-page';

/** What a page directory holds: the page, its charts, the marker, and the temp files of a write under way. */
const PAGE_FILE = /^(index\.html|\.infir2-page)(\.tmp-[\w-]+)?$/;
const CHART_FILE = /^[\w.-]+\.png(\.tmp-[\w-]+)?$/;
/** A directory listed past this many entries is nobody's page. */
const MAX_LISTED = 10_000;

function list(dir: string): string[] {
  const d = opendirSync(dir);
  const out: string[] = [];
  try {
    for (let e = d.readSync(); e && out.length <= MAX_LISTED; e = d.readSync()) out.push(e.name);
  } finally {
    d.closeSync();
  }
  return out;
}

/** A page written before the marker existed: only its files, and a page whose title says infir2 wrote it. */
function olderPage(dir: string, names: string[]): boolean {
  if (!names.includes('index.html') || !names.every((n) => PAGE_FILE.test(n) || n === 'charts')) return false;
  if (names.includes('charts') && !list(join(dir, 'charts')).every((n) => CHART_FILE.test(n))) return false;
  const head = readFileSync(join(dir, 'index.html')).subarray(0, 512).toString('utf8');
  return /<title>infir2 (report|compare): /.test(head);
}

/**
 * Why a report or a comparison must not be written into `dir`, or null: a symbolic link (`--out` through a link
 * wrote into its target), something other than a directory, or a directory that is not empty and holds no page of
 * ours (`report --out /etc` wrote /etc/index.html and /etc/charts/). A missing one is made fresh.
 */
export function pageDirProblem(dir: string): string | null {
  let st;
  try {
    st = lstatSync(dir);
  } catch {
    return null;
  }
  if (st.isSymbolicLink()) return `${dir} is a symbolic link (to ${readlinkSync(dir)}): give the directory itself`;
  if (!st.isDirectory()) return `${dir} is not a directory`;
  const names = list(dir);
  const charts = join(dir, 'charts');
  if (names.includes('charts') && !lstatSync(charts).isDirectory()) return `${charts} is not a directory (a symbolic link?)`;
  if (!names.length || names.includes(PAGE_MARKER) || olderPage(dir, names)) return null;
  return `${dir} is not empty and holds no infir2 report or comparison (no ${PAGE_MARKER})`;
}
