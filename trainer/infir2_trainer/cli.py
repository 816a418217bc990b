"""Command line: one subcommand per stage, Megatron/slime argument names (see trainer/README.md, the contract).

Bad arguments exit 2 with one `error: ...` line (argparse's usage dump is dropped: the orchestrator logs one
line per failure); every other expected failure exits 1 with one `error: ...` line; never a traceback unless
INFIR2_TRAINER_DEBUG=1.
"""
import argparse
import re
import os
import sys

from .runtime import TrainerError
from . import distributed


class UsageError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def _bool(v: str) -> bool:
    """`--force-pow-2-scale false` must mean False (the original tool's type=bool turned every string True)."""
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "y", "on"):
        return True
    if s in ("0", "false", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {v!r}")


def _pos_int(v):
    n = int(v)
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {v}")
    return n


def _split(v):
    """Megatron's --split: up to three non-negative weights, not all 0 (e.g. 969,30,1)."""
    if not re.fullmatch(r"\d+(\.\d+)?(,\d+(\.\d+)?){0,2}", v) or not any(float(x) for x in v.split(",")):
        raise argparse.ArgumentTypeError(f"expected up to three weights like 969,30,1, not all 0, got {v!r}")
    return v


def _nonneg_int(v):
    n = int(v)
    if n < 0 or n >= 2 ** 40:
        raise argparse.ArgumentTypeError(f"must be an integer in [0, 2^40), got {v}")
    return n


def _nonneg_float(v):
    x = float(v)
    if not x >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {v}")
    return x


# argparse names the type in "invalid <type> value: 'x'"
_pos_int.__name__ = _nonneg_int.__name__ = "integer"
_nonneg_float.__name__ = "number"
_bool.__name__ = "true/false"


def add_runtime(p):
    g = p.add_argument_group("runtime")
    g.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    g.add_argument("--kernels", choices=["auto", "emulated"], default="auto",
                   help="auto: on CUDA real BF16 tensors and real FP8 GEMMs (torch._scaled_mm, 1x128/128x128 "
                        "blocks, Hopper), the exact FP32 emulation on CPU; emulated: the emulation everywhere")
    g.add_argument("--num-threads", type=_pos_int, default=1,
                   help="intra-op threads (1 is fastest for the tiny model and keeps CPU runs bit-reproducible)")
    g.add_argument("--seed", type=_nonneg_int, default=1234)


def add_precision(p):
    g = p.add_argument_group("precision (FP8 is on when --fp8-format is given)")
    g.add_argument("--bf16", action="store_true", help="BF16 activations and compute weights, FP32 master")
    g.add_argument("--fp16", action="store_true", help=argparse.SUPPRESS)
    g.add_argument("--fp8-format", choices=["e4m3", "hybrid"], default=None)
    g.add_argument("--fp8-recipe", default="blockwise",
                   help="only 'blockwise' (TE Float8BlockScaling, the InfiR2 recipe) is emulated")
    g.add_argument("--fp8-block-size", type=_pos_int, default=128,
                   help="B for 1xB activation/gradient blocks and BxB weight blocks (local-only; TE uses 128)")
    g.add_argument("--fp8-param-gather", action="store_true", help="accepted (weights are quantised from the "
                   "FP32 master every step, which is what it does)")
    g.add_argument("--use-precision-aware-optimizer", action="store_true", help="accepted (FP32 states)")


def add_model(p, defaults: bool):
    """Architecture flags. pretrain has tiny defaults; sft/rl read the architecture from the checkpoint and only
    check flags that are passed."""
    d = (lambda v: v) if defaults else (lambda v: None)
    g = p.add_argument_group("model (Qwen2-style)")
    g.add_argument("--num-layers", type=_pos_int, default=d(2))
    g.add_argument("--hidden-size", type=_pos_int, default=d(64))
    g.add_argument("--ffn-hidden-size", type=_pos_int, default=d(128))
    g.add_argument("--num-attention-heads", type=_pos_int, default=d(4))
    g.add_argument("--num-query-groups", type=_pos_int, default=d(2))
    g.add_argument("--max-position-embeddings", type=_pos_int, default=d(128))
    g.add_argument("--rotary-base", type=float, default=d(10000.0))
    g.add_argument("--norm-epsilon", type=float, default=d(1e-6))
    g.add_argument("--untie-embeddings-and-output-weights", action="store_true", default=None if not defaults
                   else False)
    g.add_argument("--init-method-std", type=float, default=0.02)
    g.add_argument("--make-vocab-size-divisible-by", type=_pos_int, default=128)
    # flags the InfiR2/slime model scripts pass that describe exactly this architecture: accepted as no-ops
    for flag in ("--swiglu", "--disable-bias-linear", "--add-qkv-bias", "--group-query-attention",
                 "--use-rotary-position-embeddings", "--attention-softmax-in-fp32",
                 "--accumulate-allreduce-grads-in-fp32", "--no-masked-softmax-fusion"):
        g.add_argument(flag, action="store_true", help=argparse.SUPPRESS)
    g.add_argument("--normalization", choices=["RMSNorm"], default="RMSNorm")
    g.add_argument("--position-embedding-type", choices=["rope"], default="rope")
    g.add_argument("--attention-dropout", type=float, choices=[0.0], default=0.0)
    g.add_argument("--hidden-dropout", type=float, choices=[0.0], default=0.0)


def add_optimizer(p, lr, min_lr=0.0, style="linear", wd=0.01, beta2=0.999):
    g = p.add_argument_group("optimizer and learning-rate schedule (Megatron)")
    g.add_argument("--optimizer", choices=["adam"], default="adam")
    g.add_argument("--lr", type=_nonneg_float, default=lr)
    g.add_argument("--min-lr", type=_nonneg_float, default=min_lr)
    g.add_argument("--lr-decay-style", choices=["constant", "linear", "cosine", "inverse-square-root", "WSD"],
                   default=style)
    g.add_argument("--lr-decay-iters", type=_pos_int, default=None)
    g.add_argument("--lr-warmup-iters", type=int, default=0)
    g.add_argument("--lr-warmup-fraction", type=float, default=None)
    g.add_argument("--lr-warmup-init", type=float, default=0.0)
    g.add_argument("--lr-wsd-decay-iters", type=_pos_int, default=None)
    g.add_argument("--lr-wsd-decay-style", choices=["linear", "cosine", "exponential", "minus_sqrt"],
                   default="exponential")
    g.add_argument("--weight-decay", type=_nonneg_float, default=wd)
    g.add_argument("--adam-beta1", type=float, default=0.9)
    g.add_argument("--adam-beta2", type=float, default=beta2)
    g.add_argument("--adam-eps", type=float, default=1e-8)
    g.add_argument("--clip-grad", type=_nonneg_float, default=1.0)
    g.add_argument("--override-opt_param-scheduler", "--override-opt-param-scheduler",
                   dest="override_opt_param_scheduler", action="store_true")
    g.add_argument("--use-checkpoint-opt_param-scheduler", "--use-checkpoint-opt-param-scheduler",
                   dest="use_checkpoint_opt_param_scheduler", action="store_true")


def add_checkpointing(p, megatron: bool):
    g = p.add_argument_group("checkpointing (Megatron layout)")
    g.add_argument("--save", default=None)
    g.add_argument("--load", default=None)
    g.add_argument("--save-interval", type=_pos_int, default=None)
    g.add_argument("--ckpt-step", type=_pos_int, default=None)
    g.add_argument("--no-load-optim", action="store_true")
    g.add_argument("--no-load-rng", action="store_true")
    g.add_argument("--exit-interval", type=_pos_int, default=None)
    g.add_argument("--exit-signal-handler", action="store_true", help="accepted: SIGTERM always saves and exits")
    g.add_argument("--log-interval", type=_pos_int, default=10)
    if megatron:
        g.add_argument("--exit-on-missing-checkpoint", action="store_true")
        g.add_argument("--pretrained-checkpoint", default=None)
        g.add_argument("--finetune", action="store_true")
        g.add_argument("--ckpt-format", choices=["torch_dist"], default="torch_dist")
    else:
        g.add_argument("--ref-load", default=None, help="initial weights (the root's latest iteration) when --load "
                       "has no checkpoint yet")
        g.add_argument("--hf-checkpoint", default=None, help="HF dir: tokenizer/config check (RL: FP8 rollouts "
                       "when it carries a quantization_config)")
        g.add_argument("--exit-on-missing-checkpoint", action="store_true", help=argparse.SUPPRESS)


def build_parser() -> Parser:
    parser = Parser(prog="trainer/main.py", description="InfiR2 local reference trainer (tiny Qwen2, FP8 emulated)")
    sub = parser.add_subparsers(dest="command", parser_class=Parser, metavar="SUBCOMMAND")
    sub.required = True

    p = sub.add_parser("pretrain", help="Megatron pretrain_gpt.py (CPT warmup / stable / decay)")
    p.add_argument("--data-path", required=True, nargs="+")
    p.add_argument("--seq-length", type=_pos_int, default=64)
    p.add_argument("--micro-batch-size", type=_pos_int, default=8)
    p.add_argument("--global-batch-size", type=_pos_int, default=16)
    p.add_argument("--train-iters", type=_pos_int, required=True)
    p.add_argument("--eval-interval", type=_pos_int, default=None)
    p.add_argument("--eval-iters", type=_pos_int, default=4)
    p.add_argument("--split", type=_split, default=None,
                   help="train,valid,test weights of the documents, as Megatron's --split (default: the last 3%% "
                        "validate, none test)")
    add_model(p, defaults=True)
    add_optimizer(p, lr=1e-3)
    add_checkpointing(p, megatron=True)
    add_precision(p)
    add_runtime(p)

    p = sub.add_parser("sft", help="slime train_async.py SFT (loss on assistant tokens only)")
    p.add_argument("--data-path", "--prompt-data", dest="data_path", required=True)
    p.add_argument("--input-key", default="messages")
    p.add_argument("--num-epoch", type=_pos_int, default=1)
    p.add_argument("--global-batch-size", "--rollout-batch-size", dest="global_batch_size", type=_pos_int,
                   default=16)
    p.add_argument("--micro-batch-size", type=_pos_int, default=None, help="default: the global batch size")
    p.add_argument("--train-iters", type=_pos_int, default=None, help="default: epochs * (rows // batch)")
    p.add_argument("--seq-length", type=_pos_int, default=None, help="truncate longer conversations")
    p.add_argument("--eval-interval", type=_pos_int, default=None, help=argparse.SUPPRESS)
    for flag in ("--rollout-shuffle", "--calculate-per-token-loss", "--debug-train-only",
                 "--disable-compute-advantages-and-returns"):
        p.add_argument(flag, action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--loss-type", choices=["sft_loss"], default="sft_loss")
    add_model(p, defaults=False)
    add_optimizer(p, lr=1e-3, min_lr=0.0, style="cosine", wd=0.0, beta2=0.95)
    add_checkpointing(p, megatron=False)
    add_precision(p)
    add_runtime(p)

    p = sub.add_parser("rl", help="slime train.py GRPO")
    p.add_argument("--prompt-data", "--data-path", dest="prompt_data", required=True)
    p.add_argument("--input-key", default="prompt")
    p.add_argument("--label-key", default="label")
    p.add_argument("--num-rollout", type=_pos_int, required=True)
    p.add_argument("--rollout-batch-size", type=_pos_int, default=8, help="prompts per rollout")
    p.add_argument("--n-samples-per-prompt", type=_pos_int, default=8)
    p.add_argument("--global-batch-size", type=_pos_int, default=None,
                   help="samples per optimizer step (default: the whole rollout, one step per rollout)")
    p.add_argument("--micro-batch-size", type=_pos_int, default=None)
    p.add_argument("--rollout-max-response-len", type=_pos_int, default=64)
    p.add_argument("--rollout-temperature", type=_nonneg_float, default=1.0)
    p.add_argument("--rollout-top-p", type=float, default=1.0)
    p.add_argument("--advantage-estimator", choices=["grpo"], default="grpo")
    p.add_argument("--eps-clip", type=_nonneg_float, default=0.2)
    p.add_argument("--eps-clip-high", type=_nonneg_float, default=None, help="default: --eps-clip")
    p.add_argument("--use-kl-loss", action="store_true")
    p.add_argument("--kl-loss-coef", type=_nonneg_float, default=0.0)
    p.add_argument("--kl-loss-type", choices=["low_var_kl", "k3", "kl", "k2"], default="low_var_kl")
    p.add_argument("--entropy-coef", type=_nonneg_float, default=0.0)
    p.add_argument("--disable-grpo-std-normalization", action="store_true")
    p.add_argument("--use-tis", action="store_true")
    p.add_argument("--tis-clip", type=float, default=2.0)
    p.add_argument("--tis-clip-low", type=float, default=0.0)
    p.add_argument("--eval-interval", type=_pos_int, default=None, help=argparse.SUPPRESS)
    for flag in ("--apply-chat-template", "--rollout-shuffle", "--balance-data"):
        p.add_argument(flag, action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--rm-type", choices=["deepscaler", "math"], default="deepscaler")
    add_model(p, defaults=False)
    add_optimizer(p, lr=1e-4, style="constant", wd=0.1, beta2=0.98)
    add_checkpointing(p, megatron=False)
    add_precision(p)
    add_runtime(p)

    p = sub.add_parser("convert-hf", help="tools/convert_torch_dist_to_hf.py: checkpoint iteration -> HF dir")
    p.add_argument("--input-dir", required=True, help="ROOT/iter_XXXXXXX")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--force", "-f", action="store_true")
    p.add_argument("--vocab-size", type=_pos_int, default=None, help="trim the embedding rows (de-pad)")
    p.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    p.add_argument("--origin-hf-dir", default=None, help="accepted; the tokenizer files are written by the trainer")

    p = sub.add_parser("convert-fp8", help="tools/bf16_cast_fp8.py (fixed): HF BF16 -> HF FP8 E4M3 blocks")
    p.add_argument("--input-bf16-hf-path", required=True)
    p.add_argument("--output-fp8-hf-path", required=True)
    p.add_argument("--block-size", type=_pos_int, default=128)
    p.add_argument("--force-pow-2-scale", type=_bool, default=True)
    p.add_argument("--scale-dtype", choices=["float32", "float16"], default="float32",
                   help="dtype of <name>_scale_inv (the original tool writes float16, DeepSeek-V3 float32)")
    p.add_argument("--force", "-f", action="store_true")

    p = sub.add_parser("eval", help="evalscope over SGLang: avg@n accuracy of an HF dir (BF16 or FP8)")
    p.add_argument("--model-path", required=True)
    p.add_argument("--data-path", required=True)
    p.add_argument("--benchmark", default=None, help="name in the report (default: from the file name)")
    p.add_argument("--n-samples", type=_pos_int, default=4)
    p.add_argument("--temperature", type=_nonneg_float, default=0.65)
    p.add_argument("--top-p", type=float, default=0.95)
    p.add_argument("--max-tokens", type=_pos_int, default=64)
    p.add_argument("--output", required=True, help="report JSON path")
    p.add_argument("--batch-size", type=_pos_int, default=512, help="sequences generated together")
    add_runtime(p)

    p = sub.add_parser("make-data", help="regenerate the committed data files, byte for byte")
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=None, help=argparse.SUPPRESS)
    return parser


def validate(args):
    """Cross-argument checks argparse cannot express; violations are usage errors (exit 2)."""
    cmd = args.command
    if cmd in ("pretrain", "sft", "rl"):
        if args.fp16:
            raise UsageError("--fp16 is not supported (InfiR2 trains with --bf16)")
        if args.fp8_format and args.fp8_recipe != "blockwise":
            raise UsageError(f"--fp8-recipe {args.fp8_recipe}: only 'blockwise' (the InfiR2 recipe) is emulated")
        if args.lr_decay_style == "WSD" and not args.lr_wsd_decay_iters:
            raise UsageError("--lr-decay-style WSD needs --lr-wsd-decay-iters")
        if args.lr_warmup_iters < 0:
            raise UsageError("--lr-warmup-iters must be >= 0")
        if args.lr_warmup_fraction is not None and not 0 <= args.lr_warmup_fraction < 1:
            raise UsageError("--lr-warmup-fraction must be in [0, 1)")
        if args.override_opt_param_scheduler and args.use_checkpoint_opt_param_scheduler:
            raise UsageError("--override-opt_param-scheduler and --use-checkpoint-opt_param-scheduler exclude "
                             "each other")
        if args.ckpt_step is not None and not args.load:
            raise UsageError("--ckpt-step needs --load")
    world = distributed.env_world()
    if world.parallel and cmd != "pretrain":
        raise UsageError(f"{cmd}: data parallel (WORLD_SIZE={world.size}) is implemented for pretrain only")
    if cmd == "pretrain":
        if world.parallel and args.global_batch_size % (args.micro_batch_size * world.size):
            raise UsageError(f"--global-batch-size must be a multiple of --micro-batch-size × the data-parallel "
                             f"size ({args.micro_batch_size} × WORLD_SIZE {world.size})")
        if len(args.data_path) != 1:  # Megatron allows weighted blends; one file is all the local trainer needs
            raise UsageError("--data-path: give one .jsonl file")
        args.data_path = args.data_path[0]
        if args.global_batch_size % args.micro_batch_size:
            raise UsageError("--global-batch-size must be a multiple of --micro-batch-size")
        if args.lr_wsd_decay_iters and args.lr_wsd_decay_iters > (args.lr_decay_iters or args.train_iters):
            raise UsageError("--lr-wsd-decay-iters must not exceed --lr-decay-iters / --train-iters")
    if cmd == "sft":
        mbs = args.micro_batch_size or args.global_batch_size
        if args.global_batch_size % mbs:
            raise UsageError("--global-batch-size must be a multiple of --micro-batch-size")
    if cmd == "rl":
        total = args.rollout_batch_size * args.n_samples_per_prompt
        gbs = args.global_batch_size or total
        if total % gbs:
            raise UsageError("--rollout-batch-size * --n-samples-per-prompt must be a multiple of "
                             "--global-batch-size")
        if gbs % args.n_samples_per_prompt:
            raise UsageError("--global-batch-size must be a multiple of --n-samples-per-prompt")
        if args.micro_batch_size and gbs % args.micro_batch_size:
            raise UsageError("--global-batch-size must be a multiple of --micro-batch-size")
        if not 0 < args.rollout_top_p <= 1:
            raise UsageError("--rollout-top-p must be in (0, 1]")
        if args.n_samples_per_prompt < 2:
            raise UsageError("--n-samples-per-prompt must be >= 2 (GRPO normalises within a group)")
    if cmd == "eval" and not 0 < args.top_p <= 1:
        raise UsageError("--top-p must be in (0, 1]")


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        validate(args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 2
    debug = os.environ.get("INFIR2_TRAINER_DEBUG") == "1"
    try:
        return dispatch(args)
    except TrainerError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr, flush=True)
        return 1
    except Exception as e:  # noqa: BLE001 - the contract: one line, never a traceback
        if debug:
            raise
        msg = " ".join(str(e).split()) or "no message"
        print(f"error: unexpected {type(e).__name__}: {msg[:500]} (INFIR2_TRAINER_DEBUG=1 shows the traceback)",
              file=sys.stderr, flush=True)
        return 1


def dispatch(args) -> int:
    from . import runtime
    cmd = args.command
    if cmd == "make-data":
        from . import data
        try:
            names = data.generate(args.out, *([args.seed] if args.seed is not None else []))
        except OSError as e:
            raise TrainerError(f"cannot write data to {args.out}: {e.strerror or e}") from None
        print(f"wrote {', '.join(names)} to {args.out}", flush=True)
        return 0
    if cmd == "convert-hf":
        from . import convert
        convert.to_hf(args)
        return 0
    if cmd == "convert-fp8":
        from . import convert
        convert.to_fp8(args)
        return 0
    device = runtime.setup(args)
    if cmd == "eval":
        from . import evaluate
        evaluate.run(args, device)
        return 0
    from . import checkpoint
    runtime.exit_signal()  # SIGTERM from here on means: finish the iteration, save, exit 0
    if args.save:
        try:
            checkpoint.check_writable(args.save)
        except checkpoint.CheckpointError as e:
            raise TrainerError(str(e)) from None
    if cmd == "pretrain":
        from . import train_pretrain
        device = distributed.init(device)
        try:
            train_pretrain.run(args, device)
        finally:
            distributed.shutdown()
    elif cmd == "sft":
        from . import train_sft
        train_sft.run(args, device)
    elif cmd == "rl":
        from . import train_rl
        train_rl.run(args, device)
    return 0
