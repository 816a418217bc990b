/**
 * A stand-in of torch >= 2.1's torchrun layout for the process-tree tests: an agent whose two ranks each lead a
 * session of their own with RANK/LOCAL_RANK/TORCHELASTIC_RUN_ID set (docs/real-engines.md), each rank with a
 * data-loader-like worker child. A rank writes `saved<r>` on SIGTERM only if its worker is still alive, as
 * Megatron's handler can save only while its data loader lives.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { killTree, LAUNCH_ENV } from '../../../src/util/process-tree.js';

export const PY = '/usr/bin/python3';
let n = 0;
export const newToken = () => `t${process.pid}x${++n}`;

const tokens = new Set<string>();

/** SIGKILL every process of every agent started here: ranks lead sessions of their own, so by token. */
export async function killAgents(): Promise<void> {
  for (const token of tokens) await killTree(token);
  tokens.clear();
}

/**
 * A stand-in torchrun: two ranks in sessions of their own, each with a worker child; a rank writes `saved<r>` on
 * SIGTERM if its worker is still alive (else it "crashes"), as Megatron's handler needs. Prints its pids.
 */
export const AGENT = `
import os, subprocess, sys, time
d = sys.argv[1]
RANK = '''
import os, signal, subprocess, sys, time
d, r = sys.argv[1], sys.argv[2]
w = subprocess.Popen([sys.executable, "-c", "import time\\\\nwhile True: time.sleep(0.05)"])
# The handler before the line that says this rank is up: a stop may come the moment the test has read it.
term = []
signal.signal(signal.SIGTERM, lambda s, f: term.append(1))
print(os.getpid(), w.pid, flush=True)
while not term: time.sleep(0.05)
time.sleep(0.3)
if w.poll() is None: open(os.path.join(d, "saved" + r), "w").write("1")
sys.exit(0)
'''
ranks = [subprocess.Popen([sys.executable, "-c", RANK, d, str(r)], env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), TORCHELASTIC_RUN_ID="x"), start_new_session=True, stdout=subprocess.PIPE, text=True) for r in range(2)]
pids = [p.stdout.readline().split() for p in ranks]
print(os.getpid(), *[x for pair in pids for x in pair], flush=True)
for p in ranks: p.wait()
`;

export interface Agent {
  agent: number;
  ranks: number[];
  workers: number[];
  /** The process started here (the agent, or what `prefix` put in front of it), and how it ended. */
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Start the agent with `token` in its environment, in `dir`, behind `prefix` (e.g. the launcher's argv) if given. */
export async function startAgent(token: string, dir: string, prefix: string[] = []): Promise<Agent> {
  const argv = [...prefix, PY, '-c', AGENT, dir];
  const c = spawn(argv[0]!, argv.slice(1), { cwd: dir, detached: true, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, [LAUNCH_ENV]: token } });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => c.once('exit', (code, signal) => resolve({ code, signal })));
  tokens.add(token);
  let out = '';
  const line = await new Promise<string>((resolve) => {
    const take = (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) {
        c.stdout!.off('data', take);
        resolve(out);
      }
    };
    c.stdout!.on('data', take);
  });
  // Nothing more is read, and the pipe must not keep vitest waiting.
  c.stdout!.resume();
  (c.stdout as unknown as { unref(): void }).unref();
  c.unref();
  const [agent, r0, w0, r1, w1] = line.trim().split(/\s+/).map(Number);
  return { agent: agent!, ranks: [r0!, r1!], workers: [w0!, w1!], child: c, exited };
}

