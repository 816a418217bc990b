"""What the three training stages share: model/optimizer/scheduler construction, checkpoint save and load with
Megatron's and slime's rules, and Megatron's train loop (logging, --save-interval, --exit-interval, SIGTERM).
"""
import math
import os
import time

import torch

from . import checkpoint as ckpt
from .fp8 import Precision
from . import distributed as dp
from .logs import log, print_datetime, training_log, warn
from .model import GPTModel, ModelConfig
from .runtime import TrainerError, exit_signal, rng_state, set_rng_state
from .schedule import OptimizerParamScheduler, SchedulerMismatch
from .tokenizer import Tokenizer

TOKENIZER_ID = "infir2-charnum-v1"
MODEL_KEYS = ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups",
              "max_position_embeddings", "rotary_base", "norm_epsilon", "untie_embeddings_and_output_weights")


def precision_from_args(args) -> Precision:
    pow2 = os.environ.get("NVTE_FP8_BLOCK_SCALING_FP32_SCALES", "0") != "1"  # TE's switch, read the same way
    return Precision(bf16=bool(args.bf16), fp8=args.fp8_format, block=args.fp8_block_size, pow2=pow2)


def kernels_log(prec: Precision, device) -> str:
    """` > kernels: ...`: what the linears run on this device (real FP8 GEMMs, native BF16, or the emulation)."""
    return f" > kernels: {prec.on(device).kernels_note()}"


def memory_log(iteration: int) -> str:
    """Megatron's report_memory line (training/utils.py), printed on CUDA after the first logged iteration and at
    the end of training; `max allocated` is the run's peak."""
    mb = 1024.0 * 1024.0
    return (f"[Rank 0] (after {iteration} iterations) memory (MB) | allocated: {torch.cuda.memory_allocated() / mb}"
            f" | max allocated: {torch.cuda.max_memory_allocated() / mb} | reserved: "
            f"{torch.cuda.memory_reserved() / mb} | max reserved: {torch.cuda.max_memory_reserved() / mb}")


def padded_vocab(n: int, divisible_by: int) -> int:
    """Megatron pads the vocabulary to a multiple of --make-vocab-size-divisible-by (x TP)."""
    return int(math.ceil(n / divisible_by) * divisible_by)


def model_config_from_args(args) -> ModelConfig:
    tok = Tokenizer()
    cfg = ModelConfig(
        vocab_size=padded_vocab(tok.vocab_size, args.make_vocab_size_divisible_by),
        num_layers=args.num_layers, hidden_size=args.hidden_size, ffn_hidden_size=args.ffn_hidden_size,
        num_attention_heads=args.num_attention_heads, num_query_groups=args.num_query_groups or
        args.num_attention_heads, max_position_embeddings=args.max_position_embeddings,
        rotary_base=float(args.rotary_base), norm_epsilon=args.norm_epsilon,
        untie_embeddings_and_output_weights=bool(args.untie_embeddings_and_output_weights),
        init_method_std=args.init_method_std)
    try:
        cfg.validate()
    except ValueError as e:
        raise TrainerError(str(e)) from None
    return cfg


def check_model_args(args, cfg: ModelConfig, source: str):
    """SFT/RL read the architecture from the checkpoint; architecture flags passed anyway must agree (the real
    stack fails or silently changes RoPE when e.g. --rotary-base differs from the checkpoint)."""
    for key in MODEL_KEYS:
        given = getattr(args, key, None)
        if given is None or given is False:
            continue
        have = getattr(cfg, key)
        if (float(given) if isinstance(have, float) else given) != have:
            raise TrainerError(f"--{key.replace('_', '-')} {given} does not match the checkpoint in {source} "
                               f"({have})")


def build_model(cfg: ModelConfig, prec: Precision, device, seed: int) -> GPTModel:
    model = GPTModel(cfg, prec)
    model.init_weights(seed)
    return model.to(device)


def build_optimizer(model, args) -> torch.optim.Optimizer:
    """AdamW (decoupled weight decay, bias correction) on FP32 master weights with FP32 states; no weight decay
    for biases and 1-D parameters (norm weights), as MCore's get_param_groups does."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.dim() == 1 or name.endswith(".bias") else decay).append(p)
    groups = [{"params": decay, "wd_mult": 1.0}, {"params": no_decay, "wd_mult": 0.0}]
    kw = {"fused": True} if next(model.parameters()).is_cuda else {}  # one kernel for all params (same math)
    return torch.optim.AdamW(groups, lr=args.lr, betas=(args.adam_beta1, args.adam_beta2), eps=args.adam_eps,
                             weight_decay=args.weight_decay, **kw)


def build_scheduler(optimizer, args, train_iters: int, gbs: int) -> OptimizerParamScheduler:
    decay_iters = args.lr_decay_iters or train_iters
    if args.lr_warmup_fraction is not None:
        warmup_steps = int(args.lr_warmup_fraction * decay_iters * gbs)
    else:
        warmup_steps = args.lr_warmup_iters * gbs
    wsd = args.lr_wsd_decay_iters * gbs if args.lr_wsd_decay_iters else None
    try:
        return OptimizerParamScheduler(
            optimizer, init_lr=args.lr_warmup_init, max_lr=args.lr, min_lr=args.min_lr,
            lr_warmup_steps=warmup_steps, lr_decay_steps=decay_iters * gbs, lr_decay_style=args.lr_decay_style,
            start_wd=args.weight_decay, end_wd=args.weight_decay, wsd_decay_steps=wsd,
            lr_wsd_decay_style=args.lr_wsd_decay_style,
            use_checkpoint_opt_param_scheduler=args.use_checkpoint_opt_param_scheduler,
            override_opt_param_scheduler=args.override_opt_param_scheduler)
    except ValueError as e:
        raise TrainerError(str(e)) from None


def clip_grads(model, clip: float) -> float:
    """Global L2 norm over FP32 grads (reported before clipping, as Megatron does)."""
    params = [p for p in model.parameters() if p.grad is not None]
    norm = torch.nn.utils.clip_grad_norm_(params, clip if clip and clip > 0 else float("inf"))
    return float(norm)


# ---------------------------------------------------------------------------------------------------------------
# Checkpoints

class State:
    """The run's position: what Megatron keeps in `iteration` and `consumed_train_samples`, plus stage extras."""

    def __init__(self):
        self.iteration = 0
        self.consumed = 0
        self.extra = {}


def save_checkpoint(args, stage: str, state: State, model, optimizer, scheduler):
    common = {
        "stage": stage,
        "iteration": state.iteration,
        "consumed_train_samples": state.consumed,
        "extra": state.extra,
        "model_config": model.cfg.to_dict(),
        "tokenizer": TOKENIZER_ID,
        "precision": model.prec.describe(),
        "scheduler": scheduler.state_dict(),
        "rng": rng_state(),
        "args": {k: v for k, v in vars(args).items() if isinstance(v, (int, float, str, bool, type(None)))},
    }
    model_state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    # Data parallel: every rank has finished the iteration before rank 0 writes, and waits until it has written.
    dp.barrier()
    if dp.world().main:
        ckpt.save(args.save, state.iteration, common, model_state, optimizer.state_dict(), log=log)
    dp.barrier()


def load_model_config(common: dict, where: str) -> ModelConfig:
    if common.get("tokenizer") != TOKENIZER_ID:
        raise TrainerError(f"checkpoint {where} was not written by this trainer (tokenizer "
                           f"{common.get('tokenizer')!r})")
    try:
        return ModelConfig(**common["model_config"])
    except (KeyError, TypeError) as e:
        raise TrainerError(f"corrupt checkpoint {where}: bad model config ({e})") from None


def load_weights(model, model_state: dict, where: str):
    try:
        model.load_state_dict(model_state, strict=True)
    except RuntimeError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else "mismatch"
        raise TrainerError(f"checkpoint {where} does not fit the model: {first}") from None


def restore_training_state(parts, state, optimizer, scheduler, args, where):
    """Everything but the weights: iteration, data position, optimizer, scheduler, RNG (Megatron's flags)."""
    common = parts["common"]
    state.iteration = int(common["iteration"])
    state.consumed = int(common["consumed_train_samples"])
    state.extra = dict(common.get("extra", {}))
    if not args.no_load_optim:
        try:
            optimizer.load_state_dict(parts["optimizer"])
        except (ValueError, KeyError, RuntimeError) as e:
            raise TrainerError(f"checkpoint {where}: optimizer state does not fit ({e})") from None
        try:
            scheduler.load_state_dict(common["scheduler"])
        except SchedulerMismatch as e:
            raise TrainerError(str(e)) from None
    if not args.no_load_rng:
        set_rng_state(common["rng"])


def latest_of(root: str, what: str) -> int:
    """The tracker iteration of a root that must exist (--ref-load, --pretrained-checkpoint)."""
    try:
        it = ckpt.resolve(root)
    except ckpt.CheckpointError as e:
        raise TrainerError(str(e)) from None
    if it is None:
        raise TrainerError(f"{what} {root} has no complete checkpoint ({ckpt.TRACKER} not found)")
    return it


def read_parts(root, iteration, parts=ckpt.PARTS):
    try:
        return ckpt.load(root, iteration, parts=parts, log=log)
    except ckpt.CheckpointError as e:
        raise TrainerError(str(e)) from None


def same_dir(a, b) -> bool:
    return bool(a and b) and os.path.abspath(a) == os.path.abspath(b)


def resolve_load(args):
    """Megatron's --load rule: tracker or --ckpt-step; no tracker = start from scratch with Megatron's warning
    (or exit 1 with --exit-on-missing-checkpoint). Returns the iteration or None."""
    if not args.load:
        if args.ckpt_step is not None:
            raise TrainerError("--ckpt-step needs --load")
        return None
    try:
        it = ckpt.resolve(args.load, args.ckpt_step)
    except ckpt.CheckpointError as e:
        raise TrainerError(str(e)) from None
    if it is None:
        tracker = os.path.join(args.load, ckpt.TRACKER)
        if args.exit_on_missing_checkpoint:
            raise TrainerError(f"--exit-on-missing-checkpoint: no checkpoint to load ({tracker} not found)")
        log(f"WARNING: could not find the metadata file {tracker}")
        log("    will not load any checkpoints and will start from random")
        if os.path.basename(os.path.normpath(args.load)).startswith("iter_"):
            warn(f"WARNING: --load {args.load} looks like an iter_* directory; pass the checkpoint root and "
                 f"--ckpt-step N instead")
    return it


# ---------------------------------------------------------------------------------------------------------------
# The loop

def train_loop(args, stage: str, state: State, train_iters: int, gbs: int, model, optimizer, scheduler, step_fn,
               flops_per_sample: float = 0.0, on_eval=None, resumed_in_save_dir: bool = False):
    """Megatron's train(): run step_fn until train_iters, with its logging, saving and exit rules.

    step_fn() -> dict(loss=float, grad_norm=float|None, nan=bool, samples=int, reward=float|None)
    Returns 'done', 'exit' (--exit-interval) or 'sigterm'.
    """
    signals = exit_signal()
    on_cuda = next(model.parameters()).is_cuda
    memory_reported = False
    # a run resumed from its own save dir already has its current iteration on disk: a rerun after completion
    # trains nothing and rewrites nothing
    last_saved = state.iteration if resumed_in_save_dir else None
    # Per --log-interval, reset after each line as Megatron resets them (training.py:1579–1581).
    acc = {"loss": 0.0, "reward": 0.0, "n": 0, "time": 0.0, "skipped": 0, "nan": 0}

    def save():
        nonlocal last_saved
        if args.save:
            save_checkpoint(args, stage, state, model, optimizer, scheduler)
            last_saved = state.iteration

    log("training ...")
    while state.iteration < train_iters:
        t0 = time.time()
        out = step_fn()
        state.iteration += 1
        state.consumed += out.get("samples", gbs)
        dt = time.time() - t0
        if out.get("nan"):
            acc["nan"] += 1
            acc["skipped"] += 1
        else:
            acc["loss"] += out["loss"]
            acc["reward"] += out.get("reward") or 0.0
            acc["n"] += 1
        acc["time"] += dt
        if state.iteration % args.log_interval == 0 or state.iteration == train_iters:
            n_iters = max(1, acc["n"] + acc["skipped"])
            elapsed = acc["time"] / n_iters
            tflops = flops_per_sample * gbs / max(elapsed, 1e-9) / 1e12
            loss = acc["loss"] / max(acc["n"], 1) if acc["n"] else float("nan")
            reward = acc["reward"] / max(acc["n"], 1) if out.get("reward") is not None else None
            log(training_log(state.iteration, train_iters, state.consumed, elapsed * 1000.0, tflops,
                             optimizer.param_groups[0]["lr"], gbs, {"lm loss": loss}, out.get("grad_norm"),
                             acc["skipped"], acc["nan"], reward=reward))
            acc = {"loss": 0.0, "reward": 0.0, "n": 0, "time": 0.0, "skipped": 0, "nan": 0}
            if on_cuda and not memory_reported:
                log(memory_log(state.iteration))
                memory_reported = True
        if on_eval is not None and args.eval_interval and state.iteration % args.eval_interval == 0:
            on_eval(state.iteration)
        # megatron/training/training.py::checkpoint_and_decide_exit; a SIGTERM that reached any rank stops them all
        if dp.any_rank(signals.received):
            save()
            print_datetime("exiting program after receiving SIGTERM.")
            return "sigterm"
        saved_now = False
        if args.save and args.save_interval and state.iteration % args.save_interval == 0:
            save()
            saved_now = True
        if args.exit_interval and state.iteration % args.exit_interval == 0:
            if not saved_now:
                save()
            print_datetime(f"exiting program at iteration {state.iteration}")
            return "exit"
    print_datetime("after training is done")
    if on_cuda:
        log(memory_log(state.iteration))
    if args.save and state.iteration != 0 and last_saved != state.iteration:
        save()  # Megatron saves at the end unless the last iteration was just saved
    return "done"


def slime_start(args, device, prec, stage: str):
    """slime's load rule for SFT and RL: --load with a checkpoint resumes everything (LOAD_DIR == SAVE_DIR makes a
    restart continue); otherwise the weights of --ref-load's latest iteration start a fresh stage at
    iteration 0. Returns (model, cfg, parts_to_resume or None)."""
    it = resolve_load(args) if args.load and (args.ckpt_step is not None or
                                              os.path.isfile(os.path.join(args.load, ckpt.TRACKER))) else None
    if it is not None:
        parts = read_parts(args.load, it)
        if parts["common"].get("stage") != stage:
            raise TrainerError(f"--load {args.load} holds a {parts['common'].get('stage')} checkpoint, not {stage}; "
                               f"use --ref-load for the previous stage and an empty --load/--save dir")
        cfg, where = load_model_config(parts["common"], args.load), args.load
    else:
        if not args.ref_load:
            raise TrainerError(f"{stage} needs --ref-load (the previous stage's checkpoint root) or a --load dir "
                               f"with a checkpoint to resume")
        rit = latest_of(args.ref_load, "--ref-load")
        ref = read_parts(args.ref_load, rit, parts=("common", "model"))
        cfg, where = load_model_config(ref["common"], args.ref_load), args.ref_load
        log(f" > {stage}: starting from {args.ref_load} iteration {rit} (weights only)")
        parts = None
    check_model_args(args, cfg, where)
    model = GPTModel(cfg, prec).to(device)
    load_weights(model, (parts or ref)["model"], where)
    return model, cfg, parts
