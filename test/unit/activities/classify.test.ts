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

describe('classifyExit: hang from NCCL / watchdog timeouts in the log', () => {
  const WATCHDOG =
    '[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.';
  // What torch 2.4+ prints on every rank when an all-reduce never completes, then the process aborts (SIGABRT).
  const WATCHDOG_TAIL = [
    ' iteration      120/    1000 | consumed samples:        15360 | lm loss: 2.912E+00 |',
    `[rank1]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] ${WATCHDOG}`,
    '[rank1]:[E321 02:07:08.465150152 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 1] Exception (either an error or timeout) detected by watchdog at work: 1580, last enqueued NCCL work: 1582, last completed NCCL work: 1579.',
    '[rank1]:[E321 02:07:08.465234069 ProcessGroupNCCL.cpp:1709] [PG 1 Rank 1] Timeout at NCCL work: 1580, last enqueued NCCL work: 1582, last completed NCCL work: 1579.',
    '[rank1]:[E321 02:07:08.465241154 ProcessGroupNCCL.cpp:621] [Rank 1] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.',
    '[rank1]:[E321 02:07:08.465246900 ProcessGroupNCCL.cpp:627] [Rank 1] To avoid data inconsistency, we are taking the entire process down.',
    "terminate called after throwing an instance of 'c10::DistBackendError'",
    `  what():  [PG 1 Rank 1] Process group watchdog thread terminated with exception: ${WATCHDOG}`,
    'Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:609 (most recent call first):',
    'E0321 02:07:09.120000 80700 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -6) local_rank: 1 (pid: 80747) of binary: /usr/bin/python',
    'torch.distributed.elastic.multiprocessing.errors.ChildFailedError:',
  ];

  it('the watchdog timeout of a collective is a hang, reported by its most telling line', () => {
    const r = classifyExit(facts({ exitCode: 1, tail: WATCHDOG_TAIL }));
    expect(r.cls).toBe('hang');
    expect(r.reason).toBe(`what():  [PG 1 Rank 1] Process group watchdog thread terminated with exception: ${WATCHDOG}`.slice(0, 300));
  });

  it('also when the trainer itself died of the SIGABRT (no torchrun in between)', () => {
    expect(classifyExit(facts({ exitCode: null, signal: 'SIGABRT', tail: WATCHDOG_TAIL.slice(0, 8) })).cls).toBe('hang');
  });

  it.each([
    ['older torch (E ProcessGroupNCCL)', '[E ProcessGroupNCCL.cpp:737] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds before timing out.'],
    ['reduce-scatter', '[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, NumelOut=68124672, Timeout(ms)=600000) ran for 600061 milliseconds before timing out.'],
    ['blocking wait', 'torch.distributed.DistBackendError: [Rank 0] Work WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) timed out in blocking wait (TORCH_NCCL_BLOCKING_WAIT=1).'],
    ['communicator aborted', 'RuntimeError: NCCL communicator was aborted on rank 3. Original reason for failure was: [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800340 milliseconds before timing out.'],
    ['communicator aborted (reason elsewhere)', '[rank2]: RuntimeError: NCCL communicator was aborted on rank 2.'],
    ['some NCCL operations timed out', '[rank4]:[E1016 03:31:38.929241154 ProcessGroupNCCL.cpp:621] [Rank 4] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.'],
    ['heartbeat monitor', '[rank0]:[F1016 03:41:38.000000000 ProcessGroupNCCL.cpp:1306] [PG 0 (default_pg) Rank 0] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=1'],
    ['watchdog stuck', "[rank0]:[E1016 03:41:38.000000000 ProcessGroupNCCL.cpp:1251] [PG 0 Rank 0] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives."],
    ['gloo', '[rank2]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete'],
    ['store: a peer never joined', 'torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/3 clients joined.'],
    ['store barrier', 'RuntimeError: Timed out initializing process group in store based barrier on rank 1, for key: store_based_barrier_key:1 (world_size=8, num_workers_joined=7, timeout=0:30:00)'],
    ['store socket', 'torch.distributed.DistNetworkError: The client socket has timed out after 300000ms while trying to connect to (10.0.0.1, 29500).'],
    ['torchrun rendezvous', 'torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError'],
  ])('%s', (_name, line) => {
    const r = classifyExit(facts({ exitCode: 1, tail: ['Traceback (most recent call last):', '  File "pretrain_gpt.py", line 10, in <module>', `  ${line}  `, '[rank0]: exiting'] }));
    expect(r).toEqual({ cls: 'hang', reason: line.slice(0, 300) });
  });

  it('an abort after an NCCL error (a peer died, a link broke) is a crash, not a hang', () => {
    const tail = [
      '[rank0]:[E1016 03:31:38.929241154 ProcessGroupNCCL.cpp:1595] [PG 0 Rank 0] Process group watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error, NCCL version 2.21.5',
      '[rank0]:[E1016 03:31:38.929241154 ProcessGroupNCCL.cpp:621] [Rank 0] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.',
      'RuntimeError: NCCL communicator was aborted on rank 0.',
    ];
    expect(classifyExit(facts({ exitCode: 1, tail })).cls).toBe('crash');
  });

  it('an OOM on one rank stays oom when its peers then time out', () => {
    const tail = ['[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.', ...WATCHDOG_TAIL];
    expect(classifyExit(facts({ exitCode: 1, tail })).cls).toBe('oom');
  });

  it('a missing file on one rank stays config when its peers then time out', () => {
    const tail = ["[rank0]: FileNotFoundError: [Errno 2] No such file or directory: '/data/cpt_text_document.idx'", ...WATCHDOG_TAIL];
    expect(classifyExit(facts({ exitCode: 1, tail })).cls).toBe('config');
  });

  it("a save after SIGTERM stays preempted; an outside kill stays preempted", () => {
    expect(classifyExit(facts({ exitCode: 0, sawSigtermExit: true, tail: [...WATCHDOG_TAIL, '[exiting program after receiving SIGTERM.]'] })).cls).toBe('preempted');
    expect(classifyExit(facts({ exitCode: null, signal: 'SIGTERM', tail: WATCHDOG_TAIL })).cls).toBe('preempted');
  });

  it('a stall kill keeps its own reason', () => {
    expect(classifyExit(facts({ stoppedBy: 'stall', exitCode: null, signal: 'SIGKILL', tail: WATCHDOG_TAIL })).reason).toMatch(/stall timeout/);
  });

  it('timeouts that are not distributed ones stay crashes', () => {
    for (const line of ['TimeoutError: [Errno 110] Connection timed out', 'requests.exceptions.ReadTimeout: HTTPSConnectionPool(host=huggingface.co): Read timed out.']) {
      expect(classifyExit(facts({ exitCode: 1, tail: [line] })).cls).toBe('crash');
    }
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
    ['srun: a rank OOM-killed on another node', 'srun: error: gpu-node-07: task 3: Out Of Memory'],
    ['slurmstepd: the cgroup OOM killer', 'slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. Some of the step tasks have been OOM Killed.'],
    ['Ray: the memory monitor', 'ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.'],
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

describe('classifyExit: the kernel OOM killer', () => {
  const counted = { count: 1, file: '/sys/fs/cgroup/memory/job/memory.oom_control' };

  it('a SIGKILL while the OOM killer fired is oom, and says where it was counted', () => {
    const r = classifyExit(facts({ exitCode: null, signal: 'SIGKILL', oomKills: counted }));
    expect(r).toEqual({ cls: 'oom', reason: "killed by the kernel's OOM killer (1 OOM kill in /sys/fs/cgroup/memory/job/memory.oom_control during the attempt)" });
  });

  it.each([
    ['torchrun reporting a killed rank', { exitCode: 1, tail: ['torch.distributed.elastic.multiprocessing.api: failed (exitcode: -9) local_rank: 3 (pid: 4242)', 'Signal 9 (SIGKILL) received by PID 4242'] }],
    ['a shell wrapper', { exitCode: 137, tail: ['train.sh: line 12:  4242 Killed                  python train.py'] }],
    ['srun', { exitCode: 1, tail: ['srun: error: gpu-node-07: task 3: Killed'] }],
  ])('%s, while the OOM killer fired, is oom', (_name, f) => {
    expect(classifyExit(facts({ ...f, oomKills: { count: 2, file: '/proc/vmstat' } })).cls).toBe('oom');
  });

  it('a SIGKILL with no OOM kill counted stays preempted (an operator, a scheduler)', () => {
    expect(classifyExit(facts({ exitCode: null, signal: 'SIGKILL', oomKills: { count: 0, file: '/proc/vmstat' } })).cls).toBe('preempted');
    expect(classifyExit(facts({ exitCode: null, signal: 'SIGKILL' })).cls).toBe('preempted');
  });

  it('an OOM kill elsewhere does not turn an ordinary crash into oom', () => {
    expect(classifyExit(facts({ exitCode: 1, tail: ['RuntimeError: boom'], oomKills: counted })).cls).toBe('crash');
  });

  it('our own stop is not the OOM killer', () => {
    expect(classifyExit(facts({ stoppedBy: 'stall', exitCode: null, signal: 'SIGKILL', oomKills: counted })).cls).toBe('hang');
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

describe('classifyExit: storage', () => {
  it.each([
    ["OSError: [Errno 28] No space left on device: '/data/run/cpt/iter_0000040/model.pt'"],
    ['error: cannot save checkpoint to /data/run/cpt/iter_0000040: Read-only file system'],
    ["OSError: [Errno 122] Disk quota exceeded: '/home/u/ckpt/common.pt'"],
  ])('a disk that refused a write is storage, named by the line: %s', (line) => {
    expect(classifyExit(facts({ exitCode: 1, tail: [...TRACEBACK, line] }))).toEqual({ cls: 'storage', reason: line });
  });

  it('before config and crash (a save that failed is not a bad argument), after a stop of ours', () => {
    const tail = ['error: argument --save: cannot write', "OSError: [Errno 28] No space left on device: '/c'"];
    expect(classifyExit(facts({ exitCode: 2, tail })).cls).toBe('storage');
    expect(classifyExit(facts({ stoppedBy: 'stall', tail })).cls).toBe('hang');
  });
});
