/**
 * Evaluation with SGLang + evalscope, as InfiR2's scripts/eval/*.sh (docs/infir2-recipe.md §5). A step is one
 * argv, so the server's lifecycle lives in a small supervisor script shipped here (tools/evalscope-runner.sh):
 * start the server, wait until it generates, run evalscope, stop the server on every path, write the score.
 */
import { join } from 'node:path';
import type { Benchmark, EvalConfig, Recipe } from '../recipe/schema.js';
import { num } from './argv.js';
import type { StepBody } from './types.js';

export const EVALSCOPE_RUNNER = 'src/backends/tools/evalscope-runner.sh';

export interface EvalscopeSpec {
  stepDir: string;
  projectRoot: string;
  software: Recipe['software'];
  eval: EvalConfig;
  benchmarkName: string;
  benchmark: Benchmark;
  modelPath: string;
  servedName: string;
  port: number;
  what: string;
}

/** The scripts' GENERATION_CONFIG (LiveCodeBench names its length key `max_new_tokens`). */
export function generationConfig(b: Benchmark): Record<string, unknown> {
  return { do_sample: true, temperature: b.temperature, top_p: b.topP, [b.maxTokensKey]: b.maxTokens, n: b.samples };
}

/** The scripts' DATASET_ARGS: `{<dataset>: {local_path?, ...}}`. */
export function datasetArgs(dataset: string, b: Benchmark): Record<string, unknown> {
  return { [dataset]: { ...(b.data ? { local_path: b.data } : {}), ...(b.datasetArgs ?? {}) } };
}

export function evalStep(s: EvalscopeSpec): StepBody {
  const b = s.benchmark;
  const dataset = b.dataset ?? s.benchmarkName;
  const server = s.eval.server;
  const report = join(s.stepDir, 'report.json');
  return {
    command: {
      argv: [
        'bash',
        join(s.projectRoot, EVALSCOPE_RUNNER),
        '--python', s.software.python,
        '--model-path', s.modelPath,
        '--served-name', s.servedName,
        '--port', String(s.port),
        '--tp', String(server.tensorParallel),
        '--warmups', String(server.warmups),
        '--max-running-requests', String(server.maxRunningRequests),
        '--chunked-prefill-size', String(server.chunkedPrefillSize),
        '--ready-timeout', String(server.readyTimeout),
        '--work-dir', join(s.stepDir, 'evalscope'),
        '--benchmark', s.benchmarkName,
        '--dataset', dataset,
        '--dataset-args', JSON.stringify(datasetArgs(dataset, b)),
        '--generation-config', JSON.stringify(generationConfig(b)),
        '--eval-batch-size', String(b.batchSize),
        '--timeout', num(b.timeout),
        '--api-key', s.eval.apiKey,
        '--report', report,
      ],
      env: { ...s.eval.env },
      cwd: s.stepDir,
    },
    resume: null,
    progress: { format: 'evalscope', totalIterations: null },
    checkpoint: null,
    completion: { kind: 'files', paths: [report] },
    inputs: { model: s.modelPath, ...(b.data ? { data: b.data } : {}) },
    outputs: { report, workDir: join(s.stepDir, 'evalscope') },
    gpus: server.tensorParallel,
    nodes: 1,
    summary: `evaluate ${s.what} on ${dataset}: avg@${b.samples}, T=${b.temperature}, top-p ${b.topP}, ≤ ${b.maxTokens} tokens`,
  };
}
