/**
 * Every place where a compiled plan deliberately differs from the InfiR2 scripts (docs/infir2-recipe.md), with
 * the reason. The reproduction tests accept exactly these differences and nothing else; `infir2 plan` and the
 * recipe reference list them.
 */
export interface Fix {
  id: string;
  /** Backends whose commands carry the fix. */
  backends: readonly ('megatron' | 'slime' | 'convert' | 'evalscope' | 'presets')[];
  /** What the scripts do. */
  original: string;
  /** What infir2 compiles instead. */
  fix: string;
  why: string;
}

export const FIXES: readonly Fix[] = [
  {
    id: 'cpt-keep-optimizer',
    backends: ['megatron'],
    original: 'every CPT phase passes --no-load-optim --no-load-rng (the decay script --no-load-rng)',
    fix: 'dropped from every phase',
    why: 'with them each resume resets Adam and restarts the LR schedule at step 0, replaying warmup and moving the decay window (docs/infir2-recipe.md §3.2); the three phases must continue one WSD lineage',
  },
  {
    id: 'cpt-phase-boundaries',
    backends: ['megatron'],
    original: 'one warmup+stable+decay run, or a decay run started by hand from a chosen checkpoint',
    fix: 'cpt.warmup and cpt.stable each add --exit-interval <boundary> with the same --train-iters, so each stops on (and saves) its boundary checkpoint; cpt.decay runs to --train-iters',
    why: 'each phase is a durable step with its own completion, and "fork a decay from stable checkpoint N" becomes an operation (docs/architecture.md#stage-ids)',
  },
  {
    id: 'cpt-save-on-sigterm',
    backends: ['megatron'],
    original: 'no --exit-signal-handler: a SIGTERM kills the ranks without a save (docs/infir2-recipe.md §3.1: "None of these are used by the scripts")',
    fix: '--exit-signal-handler on every CPT phase',
    why: 'a cancel, a stall kill, a drained worker or a preemption then saves at the current iteration and prints "exiting program after receiving SIGTERM", instead of losing up to --save-interval (1000) iterations',
  },
  {
    id: 'cpt-bootstrap',
    backends: ['megatron'],
    original: 'the base model is loaded by appending --load <BASE_TD> (1.5B script comment)',
    fix: '--load <run>/cpt/checkpoints --pretrained-checkpoint <model.base>',
    why: 're-running the appended-load command after a crash reloads the base instead of the run\'s own checkpoints (docs/infir2-recipe.md §3.2); --pretrained-checkpoint is used only while the run has no tracker',
  },
  {
    id: 'cpt-decay-load',
    backends: ['megatron'],
    original: 'decay: --load exp/InfiR2_CPT_FP8_<S>/checkpoints/iter_0035000',
    fix: 'first start: --load <run>/cpt/checkpoints --ckpt-step <stable end> --exit-on-missing-checkpoint; resume: --load <run>/cpt.decay/checkpoints --ckpt-step N',
    why: 'Megatron looks for latest_checkpointed_iteration.txt inside the iter_* directory, finds none and trains from random init (docs/infir2-recipe.md §3.3)',
  },
  {
    id: 'cpt-resume-step',
    backends: ['megatron'],
    original: 'resume = re-run the same command (load the tracker)',
    fix: 'resume argv selects --ckpt-step N, the newest complete checkpoint the worker found, with --exit-on-missing-checkpoint',
    why: 'a save interrupted by a crash leaves a partial iter_* directory (docs/infir2-recipe.md §3.1); never fall back to random weights',
  },
  {
    id: 'cpt-untie-once',
    backends: ['megatron'],
    original: '7B: --untie-embeddings-and-output-weights given twice',
    fix: 'given once',
    why: 'a store_true flag: the repetition has no effect',
  },
  {
    id: 'run-directory',
    backends: ['megatron', 'slime', 'convert', 'evalscope'],
    original: 'outputs under $(pwd)/exp/$EXP and /path/to/... placeholders; PYTHONPATH=$PYTHONPATH:$CODE_DIR',
    fix: 'every output under <runDir>/<runId>/<step id>/ (CPT warmup+stable share <run>/cpt/checkpoints); wandb/tensorboard names <recipe>-<step id> unless the recipe names them; PYTHONPATH=<software.megatron>',
    why: 'one run directory per run, on shared storage, that resume and report read (docs/architecture.md#the-runs-view)',
  },
  {
    id: 'torchrun-local-pool',
    backends: ['megatron'],
    original: 'torchrun --rdzv_endpoint=localhost:29400 --rdzv_backend=c10d',
    fix: 'on a pool with launcher local: torchrun --standalone (torchrun and slurm pools keep the rendezvous flags; slurm adds srun)',
    why: 'two single-node jobs on one machine would collide on port 29400',
  },
  {
    id: 'slime-load-equals-save',
    backends: ['slime'],
    original: 'LOAD_DIR and SAVE_DIR are different placeholders; InfiR2\'s docs/SFT.md suggests LOAD_DIR = the previous stage',
    fix: '--load and --save are the stage\'s own checkpoint root; the previous stage is --ref-load',
    why: 'slime auto-resumes only when --load holds its own saves; pointing --load at the previous stage resumes it instead of starting the next stage from REF_LOAD (docs/infir2-recipe.md §3.4)',
  },
  {
    id: 'slime-start-rollout-id',
    backends: ['slime'],
    original: 'resume by re-running the script',
    fix: 'resume appends --start-rollout-id N+1',
    why: 'slime 8359c9a raises TypeError on resume (start_rollout_id is None before the models load; fixed upstream in THUDM/slime#504) (docs/infir2-recipe.md §3.4)',
  },
  {
    id: 'slime-submission-id',
    backends: ['slime'],
    original: 'ray job submit without --submission-id',
    fix: '--submission-id=infir2-<run>-<step>-a<attempt>-<launch token>, and `ray job stop` of it whenever an attempt ends without success (also by the attempt that takes over from a dead worker)',
    why: 'a job with a known id can be polled and stopped with `ray job status|stop` (docs/infir2-recipe.md §3.4)',
  },
  {
    id: 'sft-data-file',
    backends: ['presets'],
    original: 'DATA_DIR=/path/to/stage1_data (a directory, InfiR2\'s docs/SFT.md)',
    fix: 'a .jsonl file; lint rejects anything else',
    why: 'slime reads --prompt-data only from a .jsonl or .parquet file and raises ValueError otherwise (docs/infir2-recipe.md §2.2)',
  },
  {
    id: 'sft-1.5b-rotary-base',
    backends: ['presets'],
    original: '1.5B SFT sources slime qwen2.5-1.5B.sh: --rotary-base 10000',
    fix: '--rotary-base 1000000, as CPT trained it (and Qwen2.5-1.5B\'s rope_theta)',
    why: 'slime asserts rope_theta == rotary_base against the HF config, or RoPE silently changes (docs/infir2-recipe.md §7)',
  },
  {
    id: 'convert-vocab-size',
    backends: ['convert'],
    original: 'convert_torch_dist_to_hf.py without --vocab-size',
    fix: '--vocab-size <the HF vocab size> (convert.vocabSize, default the trained model\'s)',
    why: 'Megatron pads the embedding rows; without it the exported HF model keeps the padded rows (docs/infir2-recipe.md §4.1, §7)',
  },
  {
    id: 'convert-handoff',
    backends: ['convert'],
    original: 'the iter_* directory to convert and the output directory are picked by hand',
    fix: '--input-dir <last SFT checkpoint root>/iter_<final>, --output-dir <run>/convert.hf/hf --force',
    why: 'the stage hand-off is part of the plan; --force lets a retry overwrite a partial export (the tool refuses an existing directory)',
  },
  {
    id: 'fp8-fmt',
    backends: ['convert'],
    original: 'tools/bf16_cast_fp8.py writes quantization_config without "fmt", skips vocab.json/merges.txt and leaves the index total_size stale',
    fix: 'src/backends/tools/fp8-cast.py runs bf16_cast_fp8.py unchanged, then adds "fmt": "e4m3", copies the missing tokenizer files and recomputes total_size; pow-2 off is passed as --force-pow-2-scale ""',
    why: 'slime asserts quantization_config["fmt"] == "e4m3" (KeyError: \'fmt\', THUDM/slime#1679); --force-pow-2-scale False means True with argparse type=bool (docs/infir2-recipe.md §4.2)',
  },
  {
    id: 'eval-health-check',
    backends: ['evalscope'],
    original: 'sleep ${SERVER_READY_WAIT:-5} before evalscope',
    fix: 'poll SGLang /health_generate until it answers (eval.server.readyTimeout), failing early if the server dies',
    why: 'a 7B server takes far more than 5 s to load; evalscope would fail against a server that is not up (docs/infir2-recipe.md §5, §7)',
  },
  {
    id: 'eval-cleanup',
    backends: ['evalscope'],
    original: 'set -euo pipefail: an evalscope failure exits before `kill $SERVER_PID`',
    fix: 'a trap stops the server and its workers on every exit path (success, failure, SIGTERM)',
    why: 'the orphaned server keeps its GPUs (docs/infir2-recipe.md §5)',
  },
  {
    id: 'eval-score',
    backends: ['evalscope'],
    original: 'scores are printed, never parsed',
    fix: 'the score is read from evalscope\'s report JSON into <run>/eval.<...>/report.json ({benchmark, accuracy, ...})',
    why: 'the run records its results (docs/infir2-recipe.md §5, §7)',
  },
  {
    id: 'eval-port',
    backends: ['evalscope'],
    original: 'API_PORT=8801 and SERVED_NAME=basename(MODEL_PATH) for every benchmark',
    fix: 'port = eval.server.port + the eval step\'s index; served name <recipe>-<model>',
    why: 'eval steps may run side by side on one node; every exported model directory is called hf',
  },
];
