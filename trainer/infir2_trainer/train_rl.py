"""`rl`: GRPO as slime implements it (train.py; docs/fp8-numerics.md §6).

One rollout = --rollout-batch-size prompts x --n-samples-per-prompt responses, sampled at
--rollout-temperature up to --rollout-max-response-len tokens. Reward (deepscaler): 1 if the text after the last
</think> equals the label, else 0 (a truncated response has no answer: 0). Advantage: the reward minus its
group mean, divided by the group std (+1e-6; unbiased std as torch.std), the same for every response token.
Loss per token: max(-r A, -clip(r, 1 - eps_clip, 1 + eps_clip_high) A), r = exp(logp - logp_old), averaged
over each response's tokens, then over the global batch; + kl_loss_coef * low-variance KL to the --ref-load
weights when asked; TIS (--use-tis) reweights by clip(exp(logp_old - logp_rollout), tis_clip_low, tis_clip).
Log-probs use logits / temperature. With one optimizer step per rollout (the default) logp_old equals the live
policy, so r = 1 and the clip only acts when --global-batch-size splits a rollout into several steps.

Rollouts run through the inference precision of --hf-checkpoint: an FP8 directory (quantization_config) means
FP8 rollouts, like SGLang serving the block-FP8 model (weights re-quantised from the trainer's weights every
rollout, activations per token, FP32 scales); otherwise BF16. The sampling generator of rollout i is seeded from
(seed, i), so a resumed run draws exactly the samples an uninterrupted one would.
"""
import json
import os

import torch

from . import data as data_mod
from .fp8 import Precision
from .generate import generate
from .logs import log
from .model import GPTModel, token_logprobs
from .runtime import TrainerError, seed_all
from .tokenizer import Tokenizer
from .training import (State, build_optimizer, build_scheduler, clip_grads, kernels_log, latest_of, load_weights,
                       precision_from_args, read_parts, restore_training_state, same_dir, slime_start, train_loop)


def grpo_advantages(rewards: torch.Tensor, n: int, std_normalize: bool = True) -> torch.Tensor:
    """slime `_post_process_rewards` for grpo: per-group centring and (unbiased) std scaling."""
    r = rewards.float().view(-1, n)
    r = r - r.mean(dim=-1, keepdim=True)
    if std_normalize:
        r = r / (r.std(dim=-1, keepdim=True) + 1e-6)
    return r.view(-1)


def policy_loss(logp, old_logp, adv, mask, eps_clip, eps_clip_high, tis_weight=None):
    """slime compute_policy_loss + sum_of_sample_mean: per-token clipped surrogate, mean over each sample's
    response tokens. Returns (per-sample loss [B], clip fraction)."""
    ratio = torch.exp(logp - old_logp)
    a = adv.unsqueeze(-1)
    pg = torch.maximum(-ratio * a, -ratio.clamp(1 - eps_clip, 1 + eps_clip_high) * a)
    if tis_weight is not None:
        pg = pg * tis_weight
    clipped = ((ratio < 1 - eps_clip) | (ratio > 1 + eps_clip_high)).float()
    denom = mask.sum(-1).clamp(min=1)
    per_sample = (pg * mask).sum(-1) / denom
    clipfrac = float(((clipped * mask).sum() / mask.sum().clamp(min=1)))
    return per_sample, clipfrac


def low_var_kl(logp, ref_logp):
    r = ref_logp - logp
    return (torch.exp(r) - 1 - r).clamp(-10, 10)


def rollout_precision(args, train_prec: Precision) -> Precision:
    if not args.hf_checkpoint:
        return train_prec
    path = os.path.join(args.hf_checkpoint, "config.json")
    try:
        with open(path) as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise TrainerError(f"--hf-checkpoint {args.hf_checkpoint}: cannot read config.json ({e})") from None
    try:
        Tokenizer.from_pretrained(args.hf_checkpoint)
    except (OSError, ValueError, KeyError) as e:
        raise TrainerError(f"--hf-checkpoint {args.hf_checkpoint}: unusable tokenizer ({e})") from None
    qc = config.get("quantization_config")
    if not qc:
        return Precision(bf16=True)
    if qc.get("fmt") != "e4m3":  # slime asserts this when it updates SGLang's FP8 weights (slime#1679)
        raise TrainerError(f"--hf-checkpoint {args.hf_checkpoint}: quantization_config has no fmt 'e4m3'")
    return Precision(bf16=True, fp8="e4m3", block=int(qc["weight_block_size"][1]), pow2=False)


class Prompts:
    def __init__(self, path, key, label_key, seed):
        try:
            rows = data_mod.read_jsonl(path, [key, label_key])
        except (OSError, ValueError) as e:
            raise TrainerError(str(e)) from None
        self.rows = [(str(r[key]), str(r[label_key])) for r in rows]
        self.seed, self._epoch, self._perm = seed, None, None

    def get(self, k):
        epoch, i = divmod(k, len(self.rows))
        if epoch != self._epoch:
            g = torch.Generator().manual_seed(self.seed * 1000003 + epoch)
            self._perm, self._epoch = torch.randperm(len(self.rows), generator=g), epoch
        return self.rows[int(self._perm[i])]


def _pack(prompts, responses, pad, device):
    """[prompt + response] right-padded; response mask marks the tokens whose log-prob is trained."""
    seqs = [p + r for p, r in zip(prompts, responses)]
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), width - 1))
    for i, (p, r) in enumerate(zip(prompts, responses)):
        ids[i, :len(p) + len(r)] = torch.tensor(p + r)
        mask[i, len(p) - 1:len(p) - 1 + len(r)] = 1.0  # position t predicts token t + 1
    return ids.to(device), mask.to(device)


def _logp(model, ids, temperature):
    logits = model(ids[:, :-1])
    if temperature > 0:
        logits = logits / temperature
    return token_logprobs(logits, ids[:, 1:])


def run(args, device):
    seed_all(args.seed)
    prec = precision_from_args(args)
    rprec = rollout_precision(args, prec)
    model, cfg, parts = slime_start(args, device, prec, "rl")
    tok = Tokenizer()
    prompts = Prompts(args.prompt_data, args.input_key, args.label_key, args.seed)
    n, rbs = args.n_samples_per_prompt, args.rollout_batch_size
    total = rbs * n
    gbs = args.global_batch_size or total
    mbs = args.micro_batch_size or gbs
    eps_high = args.eps_clip if args.eps_clip_high is None else args.eps_clip_high
    optimizer = build_optimizer(model, args)
    scheduler = build_scheduler(optimizer, args, args.num_rollout * (total // gbs), gbs)
    state = State()
    if parts is not None:
        restore_training_state(parts, state, optimizer, scheduler, args, args.load)
    ref_model = None
    if args.use_kl_loss and args.kl_loss_coef > 0:
        if not args.ref_load:
            raise TrainerError("--kl-loss-coef > 0 needs --ref-load (the KL reference)")
        rit = latest_of(args.ref_load, "--ref-load")
        ref_model = GPTModel(cfg, prec).to(device)
        load_weights(ref_model, read_parts(args.ref_load, rit, parts=("common", "model"))["model"], args.ref_load)
        ref_model.eval()
    log(f" > model: {model.num_params()} parameters, train precision {prec.describe()}, rollout precision "
        f"{rprec.describe()}, device {device}")
    log(kernels_log(prec, device))
    log(f" > rollouts: {args.num_rollout} x {rbs} prompts x {n} samples, max response "
        f"{args.rollout_max_response_len} tokens, temperature {args.rollout_temperature}")

    def step():
        rollout_id = state.iteration  # iterations count completed rollouts
        batch = [prompts.get(rollout_id * rbs + i) for i in range(rbs)]
        p_ids = [tok.chat_prompt(q) for q, _ in batch for _ in range(n)]
        labels = [lab for _, lab in batch for _ in range(n)]
        room = cfg.max_position_embeddings - max(len(p) for p in p_ids)
        if room < 1:
            raise TrainerError("RL prompts do not fit --max-position-embeddings")
        gen = torch.Generator().manual_seed(args.seed * 1000003 + rollout_id)
        model.eval()
        model.prec = rprec
        responses, finished = generate(model, p_ids, min(args.rollout_max_response_len, room), tok.im_end,
                                       tok.pad, temperature=args.rollout_temperature, top_p=args.rollout_top_p,
                                       gen=gen)
        ids, mask = _pack(p_ids, responses, tok.pad, device)
        with torch.no_grad():
            rollout_logp = _logp(model, ids, args.rollout_temperature) if args.use_tis else None
            model.prec = prec
            old_logp = _logp(model, ids, args.rollout_temperature)  # the trainer's log-probs before the update
            ref_logp = _logp(ref_model, ids, args.rollout_temperature) if ref_model is not None else None
        rewards = torch.tensor([float(data_mod.is_correct(tok.decode(r), lab))
                                for r, lab in zip(responses, labels)])
        adv = grpo_advantages(rewards, n, not args.disable_grpo_std_normalization).to(device)

        model.train()
        losses, norm, clipfracs = [], None, []
        # a sample with zero advantage (its whole group got the same reward) adds exactly 0 to the loss and the
        # gradient when there is no KL/entropy term: skip its forward pass, keep it in the 1/gbs normalisation
        exact_skip = ref_model is None and args.entropy_coef == 0
        for s in range(0, total, gbs):  # total // gbs optimizer steps per rollout (slime: one by default)
            optimizer.zero_grad(set_to_none=True)
            step_loss = 0.0
            for m in range(s, s + gbs, mbs):
                sl = torch.arange(m, m + mbs, device=device)
                if exact_skip:
                    sl = sl[adv[sl] != 0]
                    if len(sl) == 0:
                        continue
                width = int(mask[sl].nonzero()[:, 1].max()) + 2 if mask[sl].any() else 2
                x, mk = ids[sl, :width], mask[sl, :width - 1]
                logp = _logp(model, x, args.rollout_temperature)
                tis = None
                if args.use_tis:
                    tis = torch.exp(old_logp[sl, :width - 1] - rollout_logp[sl, :width - 1]).clamp(
                        args.tis_clip_low, args.tis_clip)
                per_sample, cf = policy_loss(logp, old_logp[sl, :width - 1], adv[sl], mk, args.eps_clip,
                                             eps_high, tis)
                loss = per_sample.sum()
                if ref_model is not None:
                    kl = (low_var_kl(logp, ref_logp[sl, :width - 1]) * mk).sum(-1) / mk.sum(-1).clamp(min=1)
                    loss = loss + args.kl_loss_coef * kl.sum()
                if args.entropy_coef > 0:
                    logits = model(x[:, :-1]) / max(args.rollout_temperature, 1e-6)
                    ent = -(torch.softmax(logits, -1) * torch.log_softmax(logits, -1)).sum(-1)
                    loss = loss - args.entropy_coef * ((ent * mk).sum(-1) / mk.sum(-1).clamp(min=1)).sum()
                loss = loss / gbs  # mean over the global batch of per-sample token means
                loss.backward()
                step_loss += float(loss.detach())
                clipfracs.append(cf)
            if any(p.grad is not None for p in model.parameters()):
                norm = clip_grads(model, args.clip_grad)
                optimizer.step()  # (a step with no signal at all is skipped: AdamW would still decay weights)
            scheduler.step(gbs)
            losses.append(step_loss)
        lengths = [len(r) for r in responses]
        log(f"rollout {rollout_id}: {{'rollout/rewards': {rewards.mean().item():.4f}, "
            f"'rollout/zero_std_groups': {int((adv.view(-1, n) == 0).all(-1).sum())}/{rbs}, "
            f"'rollout/response_lengths': {sum(lengths) / len(lengths):.1f}, "
            f"'rollout/truncated': {1 - sum(finished) / len(finished):.4f}, "
            f"'train/pg_clipfrac': {sum(clipfracs) / max(len(clipfracs), 1):.4f}}}")
        return {"loss": sum(losses) / len(losses), "grad_norm": norm or 0.0, "samples": total,
                "reward": rewards.mean().item()}

    return train_loop(args, "rl", state, args.num_rollout, total, model, optimizer, scheduler, step,
                      resumed_in_save_dir=parts is not None and same_dir(args.load, args.save))
