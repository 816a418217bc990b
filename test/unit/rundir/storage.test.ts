import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatBytes, freeBytes, isStorageError, storageErrorInLine, storageReason } from '../../../src/rundir/storage.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'infir2-storage-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const errno = (code: string, path?: string) => Object.assign(new Error(code), { code, ...(path ? { path } : {}) });

describe('storage faults in words', () => {
  it('knows the file-system errors that are the disk\'s, and only with a path', () => {
    for (const code of ['ENOSPC', 'EROFS', 'EDQUOT', 'EACCES', 'EPERM']) expect(isStorageError(errno(code, '/x'))).toBe(true);
    for (const code of ['ENOSPC', 'EROFS', 'EDQUOT']) expect(isStorageError(errno(code))).toBe(true); // a write on an fd names no path
    expect(isStorageError(errno('EPERM'))).toBe(false); // process.kill's EPERM names no path
    expect(isStorageError(errno('ENOENT', '/x'))).toBe(false);
    expect(isStorageError(new Error('boom'))).toBe(false);
    expect(isStorageError(null)).toBe(false);
  });

  it.each([
    ["OSError: [Errno 28] No space left on device: '/data/run/cpt/iter_0000040/model.pt'", 'ENOSPC', '/data/run/cpt/iter_0000040/model.pt'],
    ['error: cannot save checkpoint to /data/run/cpt/iter_0000040: No space left on device', 'ENOSPC', '/data/run/cpt/iter_0000040'],
    ['RuntimeError: [enforce fail at inline_container.cc:595] . PytorchStreamWriter failed writing file data/3: file write failed', 'ENOSPC', null],
    ["OSError: [Errno 30] Read-only file system: '/data/run/logs/x'", 'EROFS', '/data/run/logs/x'],
    ["OSError: [Errno 122] Disk quota exceeded: '/home/u/ckpt/common.pt'", 'EDQUOT', '/home/u/ckpt/common.pt'],
    ["PermissionError: [Errno 13] Permission denied: '/data/run/cpt'", 'EACCES', '/data/run/cpt'],
  ] as const)('reads a trainer\'s line: %s', (line, code, path) => {
    expect(storageErrorInLine(line)).toEqual({ code, path });
  });

  it('leaves other lines alone', () => {
    expect(storageErrorInLine('RuntimeError: NCCL error: unhandled system error')).toBeNull();
    expect(storageErrorInLine('torch.OutOfMemoryError: CUDA out of memory.')).toBeNull();
    expect(storageErrorInLine('FileNotFoundError: [Errno 2] No such file or directory: \'/x\'')).toBeNull();
  });

  it('names the fault, the path and the room left', () => {
    const free = freeBytes(dir)!;
    expect(free).toBeGreaterThan(0);
    expect(storageReason('ENOSPC', join(dir, 'not', 'yet'))).toBe(`disk full on ${join(dir, 'not', 'yet')} (${formatBytes(free)} free)`.replace(formatBytes(free), formatBytes(freeBytes(dir)!)));
    expect(storageReason('EROFS', '/x')).toBe('read-only file system at /x');
    expect(storageReason('EACCES', '/x')).toBe('permission denied on /x');
    expect(storageReason('EDQUOT', dir)).toMatch(/^disk quota exceeded on .* \(.* free\)$/);
  });

  it('formats sizes as a person reads them', () => {
    expect(formatBytes(1.24e9)).toBe('1.2 GB');
    expect(formatBytes(340e6)).toBe('340 MB');
    expect(formatBytes(12_345)).toBe('12 kB');
  });
});
