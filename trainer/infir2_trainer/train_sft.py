"""`sft`: slime's SFT (train_async.py with sft_rollout): chat conversations, loss on the assistant tokens only.

Initial weights come from --ref-load's latest iteration; --load == --save resumes (model, optimizer,
scheduler, RNG and the data position). The loss is the per-token mean over the whole global batch
(--calculate-per-token-loss). Steps: --num-epoch * (rows // global batch), each epoch a fresh shuffle.
"""
import torch

from . import data as data_mod
from .logs import log
from .model import token_logprobs
from .runtime import TrainerError, seed_all
from .tokenizer import Tokenizer
from .training import (State, build_optimizer, build_scheduler, clip_grads, kernels_log, precision_from_args,
                       restore_training_state, same_dir, slime_start, train_loop)


class SFTData:
    def __init__(self, path, key, seq_limit, gbs, seed):
        try:
            rows = data_mod.read_jsonl(path, [key])
        except (OSError, ValueError) as e:
            raise TrainerError(str(e)) from None
        tok = Tokenizer()
        self.examples = []
        for n, r in enumerate(rows, 1):
            msgs = r[key]
            if not isinstance(msgs, list) or not all(isinstance(m, dict) and "role" in m and "content" in m
                                                     for m in msgs):
                raise TrainerError(f"{path}:{n}: '{key}' must be a list of {{role, content}} messages")
            ids, mask = tok.chat_example(msgs)
            ids, mask = ids[:seq_limit + 1], mask[:seq_limit + 1]
            if sum(mask[1:]) == 0:
                raise TrainerError(f"{path}:{n}: no assistant tokens to train on")
            self.examples.append((ids, mask))
        self.per_epoch = len(self.examples) // gbs * gbs
        if self.per_epoch == 0:
            raise TrainerError(f"{path}: {len(self.examples)} rows are fewer than one global batch ({gbs})")
        self.seed, self.pad = seed, tok.pad
        self._epoch, self._perm = None, None

    def example(self, k):
        epoch, i = divmod(k, self.per_epoch)
        if epoch != self._epoch:
            g = torch.Generator().manual_seed(self.seed * 1000003 + epoch)
            self._perm, self._epoch = torch.randperm(len(self.examples), generator=g), epoch
        return self.examples[int(self._perm[i])]

    def batch(self, start, n):
        exs = [self.example(k) for k in range(start, start + n)]
        width = max(len(ids) for ids, _ in exs)
        ids = torch.full((n, width), self.pad, dtype=torch.long)
        mask = torch.zeros((n, width))
        for j, (a, m) in enumerate(exs):
            ids[j, :len(a)] = torch.tensor(a)
            mask[j, :len(m)] = torch.tensor(m, dtype=torch.float)
        return ids, mask


def run(args, device):
    seed_all(args.seed)
    prec = precision_from_args(args)
    model, cfg, parts = slime_start(args, device, prec, "sft")
    gbs = args.global_batch_size
    mbs = args.micro_batch_size or gbs
    data = SFTData(args.data_path, args.input_key, args.seq_length or cfg.max_position_embeddings - 1, gbs,
                   args.seed)
    train_iters = args.train_iters or args.num_epoch * (data.per_epoch // gbs)
    optimizer = build_optimizer(model, args)
    scheduler = build_scheduler(optimizer, args, train_iters, gbs)
    state = State()
    if parts is not None:
        restore_training_state(parts, state, optimizer, scheduler, args, args.load)
    log(f" > model: {model.num_params()} parameters, precision {prec.describe()}, device {device}")
    log(kernels_log(prec, device))
    log(f" > data: {len(data.examples)} conversations from {args.data_path}, {train_iters} steps "
        f"({args.num_epoch} epoch(s) of {data.per_epoch // gbs})")

    def step():
        model.train()
        optimizer.zero_grad(set_to_none=True)
        ids, mask = data.batch(state.consumed, gbs)
        ids, mask = ids.to(device), mask.to(device)
        n_tokens = mask[:, 1:].sum()
        total = 0.0
        for s in range(0, gbs, mbs):
            x, m = ids[s:s + mbs], mask[s:s + mbs]
            width = int(m.nonzero()[:, 1].max()) + 1  # drop the padding columns of this micro-batch
            x, m = x[:, :width], m[:, :width]
            logp = token_logprobs(model(x[:, :-1]), x[:, 1:])
            loss = -(logp * m[:, 1:]).sum() / n_tokens
            loss.backward()
            total += float(loss.detach())
        if total != total:
            optimizer.zero_grad(set_to_none=True)
            scheduler.step(gbs)
            return {"loss": total, "nan": True, "grad_norm": None, "samples": gbs}
        norm = clip_grads(model, args.clip_grad)
        optimizer.step()
        scheduler.step(gbs)
        return {"loss": total, "grad_norm": norm, "samples": gbs}

    return train_loop(args, "sft", state, train_iters, gbs, model, optimizer, scheduler, step,
                      resumed_in_save_dir=parts is not None and same_dir(args.load, args.save))
