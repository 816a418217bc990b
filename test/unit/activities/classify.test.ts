/**
 * classifyExit: every failure class, its precedence, and a reason a person can act on.
 */
import { describe, expect, it } from 'vitest';
import { classifyExit, type ExitFacts } from '../../../src/activities/classify.js';

function facts(f: Partial<ExitFacts>): ExitFacts {
  return { exitCode: 1, signal: null, stoppedBy: null, sawSigtermExit: false, tail: [], ...f };
}

const TRACEBACK = ['Traceback (most recent call last):', '  File "pretrain_gpt.py", line 10, in <module>', '    main()'];

describe('classifyExit: hang', () => {
  it('a stall kill is a hang, whatever the exit looked like', () => {
    const r = classifyExit(facts({ stoppedBy: 'stall', exitCode: null, signal: 'SIGKILL', tail: ['CUDA out of memory'] }));
    expect(r).toEqual({ cls: 'hang', reason: 'no progress within the stall timeout; the process was killed' });
  });

  it('an attempt over its time limit is a hang', () => {
    const r = classifyExit(facts({ stoppedBy: 'timeout', exitCode: null, signal: 'SIGTERM' }));
    expect(r.cls).toBe('hang');
    expect(r.reason).toMatch(/time limit/);
  });
});

describe('classifyExit: preempted', () => {
  it('worker shutdown is preemption, even when the trainer then exits non-zero', () => {
    const r = classifyExit(facts({ stoppedBy: 'shutdown', exitCode: 1, tail: ['RuntimeError: boom'] }));
    expect(r).toEqual({ cls: 'preempted', reason: 'the worker shut down; the trainer was stopped to checkpoint' });
  });

  it.each(['SIGKILL', 'SIGTERM', 'SIGINT', 'SIGHUP'])('%s from outside is preemption', (signal) => {
    expect(classifyExit(facts({ exitCode: null, signal }))).toEqual({ cls: 'preempted', reason: `killed by ${signal} from outside the supervisor` });
  });

  it("exit 0 after Megatron's SIGTERM handler saved is preemption, not success", () => {
    const r = classifyExit(facts({ exitCode: 0, sawSigtermExit: true, tail: ['[exiting program after receiving SIGTERM.] datetime: 2025-10-01 12:00:00'] }));
    expect(r).toEqual({ cls: 'preempted', reason: 'the trainer saved and exited after SIGTERM' });
  });

  it('a non-zero exit after the SIGTERM line is not preemption by that rule', () => {
    expect(classifyExit(facts({ exitCode: 1, sawSigtermExit: true, tail: ['RuntimeError: x'] })).cls).toBe('crash');
  });
});

describe('classifyExit: oom', () => {
  it.each([
    ['torch CUDA OOM', 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB'],
    ['old-style CUDA OOM', 'RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB'],
    ['cuBLAS allocation', 'RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`'],
    ['host OOM (ENOMEM)', 'OSError: [Errno 12] Cannot allocate memory'],
    ['host OOM (Python)', 'MemoryError'],
    ['NCCL out of memory', 'torch.distributed.DistBackendError: NCCL error in: ../nccl.cpp:1, unhandled cuda error, NCCL version 2.21.5: out of memory'],
  ])('%s', (_name, line) => {
    const r = classifyExit(facts({ exitCode: 1, tail: [...TRACEBACK, `  ${line}  `, '[rank0]: exiting'] }));
    expect(r).toEqual({ cls: 'oom', reason: line });
  });

  it('reports the last OOM line when several ranks report one', () => {
    const r = classifyExit(facts({ tail: ['[rank1]: CUDA out of memory. GPU 1', 'noise', '[rank3]: CUDA out of memory. GPU 3'] }));
    expect(r).toEqual({ cls: 'oom', reason: '[rank3]: CUDA out of memory. GPU 3' });
  });

  it('wins over an outside signal and over an exit code of 2', () => {
    expect(classifyExit(facts({ exitCode: null, signal: 'SIGKILL', tail: ['CUDA out of memory'] })).cls).toBe('oom');
    expect(classifyExit(facts({ exitCode: 2, tail: ['CUDA out of memory'] })).cls).toBe('oom');
  });
});

describe('classifyExit: config', () => {
  it.each([
    ['unrecognized arguments', 'pretrain_gpt.py: error: unrecognized arguments: --bogus-flag 3'],
    ['bad value', "pretrain_gpt.py: error: argument --lr: invalid float value: 'abc'"],
    ['required argument', 'train.py: error: the following arguments are required: --hf-checkpoint'],
    ['missing module', "ModuleNotFoundError: No module named 'transformer_engine'"],
    ['missing file', "FileNotFoundError: [Errno 2] No such file or directory: '/data/aime-2024.jsonl'"],
    ['missing path (no exception name)', "cat: /data/x.jsonl: No such file or directory"],
    ['vocab/rope mismatch', 'AssertionError: rotary_base 10000 does not match the checkpoint (1000000)'],
    ['the local trainer', 'error: checkpoint /ckpt/iter_0000100 is incomplete'],
  ])('%s', (_name, line) => {
    const r = classifyExit(facts({ exitCode: 1, tail: ['loading...', ...TRACEBACK, `  ${line}`, 'E1001 12:00:00 torchrun: failed'] }));
    expect(r).toEqual({ cls: 'config', reason: line });
  });

  it('exit code 2 is bad usage, with the argparse error as the reason', () => {
    const tail = ['usage: pretrain_gpt.py [-h] [--num-layers NUM_LAYERS] ...', "pretrain_gpt.py: error: argument --lr: invalid float value: 'x'"];
    expect(classifyExit(facts({ exitCode: 2, tail }))).toEqual({ cls: 'config', reason: "pretrain_gpt.py: error: argument --lr: invalid float value: 'x'" });
  });

  it('exit code 2 with nothing recognisable still is config, and says so', () => {
    expect(classifyExit(facts({ exitCode: 2, tail: ['something odd'] }))).toEqual({ cls: 'config', reason: 'exit code 2 (bad usage)' });
  });

  it('FileNotFoundError makes even an exit 0 a config failure (its output is missing)', () => {
    const line = "FileNotFoundError: [Errno 2] No such file or directory: '/out/report.json'";
    expect(classifyExit(facts({ exitCode: 0, tail: [line] }))).toEqual({ cls: 'config', reason: line });
  });

  it('argparse usage alone (first line of the tail) is config', () => {
    expect(classifyExit(facts({ exitCode: 1, tail: ['usage: train.py [-h]'] }))).toEqual({ cls: 'config', reason: 'usage: train.py [-h]' });
  });
});

describe('classifyExit: crash', () => {
  it('exit 0 without the final checkpoint or output is a crash with a clear reason', () => {
    expect(classifyExit(facts({ exitCode: 0, tail: ['[after training is done] datetime: 2025-10-01 12:00:00'] }))).toEqual({
      cls: 'crash',
      reason: 'exited 0 but its final checkpoint or output is missing',
    });
  });

  it('a non-zero exit reports the code and the last error line', () => {
    const tail = [...TRACEBACK, 'RuntimeError: CUDA error: an illegal memory access was encountered', 'Exception raised from c10_cuda_check_implementation', 'done.'];
    expect(classifyExit(facts({ exitCode: 1, tail }))).toEqual({
      cls: 'crash',
      reason: 'exit code 1: Exception raised from c10_cuda_check_implementation',
    });
  });

  it('a non-zero exit with no error line reports just the code', () => {
    expect(classifyExit(facts({ exitCode: 134, tail: ['iteration 5/10 |'] }))).toEqual({ cls: 'crash', reason: 'exit code 134' });
    expect(classifyExit(facts({ exitCode: 1, tail: [] }))).toEqual({ cls: 'crash', reason: 'exit code 1' });
  });

  it('a signal other than the preemption ones is a crash that names the signal', () => {
    const r = classifyExit(facts({ exitCode: null, signal: 'SIGSEGV', tail: ['Fatal Python error: Segmentation fault'] }));
    expect(r.cls).toBe('crash');
    expect(r.reason).toContain('SIGSEGV');
    expect(r.reason).toContain('Fatal Python error: Segmentation fault');
    expect(classifyExit(facts({ exitCode: null, signal: 'SIGABRT' })).cls).toBe('crash');
  });

  it('cuts a very long error line to 300 characters', () => {
    const long = `RuntimeError: ${'x'.repeat(1000)}`;
    const r = classifyExit(facts({ exitCode: 1, tail: [long] }));
    expect(r.reason).toBe(`exit code 1: ${long.slice(0, 300)}`);
  });

  it('trims indentation from the reported line', () => {
    expect(classifyExit(facts({ exitCode: 3, tail: ['    ValueError: bad shape   '] })).reason).toBe('exit code 3: ValueError: bad shape');
  });
});
