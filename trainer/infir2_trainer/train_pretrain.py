"""`pretrain`: Megatron pretrain_gpt.py on the tiny model (the CPT stage and its WSD phases).

Data: the documents of --data-path are tokenized, joined with <|endoftext|> and cut into samples of
seq_length + 1 tokens (Megatron's GPTDataset), shuffled per epoch with the seed. Sample k of the run is a pure
function of (seed, k), so restoring `consumed_train_samples` restores the data position exactly. The documents are
split into train, validation and test as Megatron splits them with --split (weights, e.g. 969,30,1); without it
the last 3% are the validation split and there is no test split. Validation runs every --eval-interval, and once
more on the validation and the test split when training ends (not after --exit-interval or a SIGTERM), each
printed as Megatron prints it.
"""
import re

import torch
import torch.nn.functional as F

from . import data as data_mod
from . import distributed as dp
from .logs import log, validation_log
from .model import token_logprobs
from .runtime import TrainerError, seed_all
from .tokenizer import Tokenizer
from .training import (State, build_model, build_optimizer, build_scheduler, clip_grads, kernels_log, latest_of,
                       load_model_config, load_weights, model_config_from_args, precision_from_args, read_parts,
                       resolve_load, restore_training_state, same_dir, train_loop)

VALID_FRACTION = 0.03


def split_bounds(n: int, split: str | None) -> tuple[int, int]:
    """Where the validation and the test documents begin. Megatron core_v0.14.0: the weights normalised
    (datasets/blended_megatron_dataset_config.py:123 parse_and_normalize_split), each split the documents from
    int(round(start * n)) to int(round(end * n)) of the cumulative weights (blended_megatron_dataset_builder.py:440).
    Without --split: the last 3% validate (at least one document), none test."""
    if split is None:
        n_valid = max(1, int(n * VALID_FRACTION)) if n > 1 else 0
        return n - n_valid, n
    w = [float(x) for x in re.findall(r"[.0-9]+", split)]
    w = (w + [0.0, 0.0, 0.0])[:3]
    if sum(w) <= 0:
        raise TrainerError(f"--split {split}: the weights must not all be 0")
    w = [x / sum(w) for x in w]
    return int(round(w[0] * n)), int(round((w[0] + w[1]) * n))


class PretrainData:
    def __init__(self, path: str, seq_length: int, seed: int, split: str | None = None):
        try:
            rows = data_mod.read_jsonl(path, ["text"])
        except (OSError, ValueError) as e:
            raise TrainerError(str(e)) from None
        tok = Tokenizer()
        valid_at, test_at = split_bounds(len(rows), split)
        self.seq, self.seed = seq_length, seed
        self.train = self._stream(tok, rows[:valid_at])
        if len(self.train) == 0:
            raise TrainerError(f"{path}: --split {split} leaves no document to train on")
        self.valid = self._stream(tok, rows[valid_at:test_at]) if test_at > valid_at else None
        self.test = self._stream(tok, rows[test_at:]) if len(rows) > test_at else None
        if split is None and self.valid is None:
            self.valid = self.train  # one document: it validates too, as before --split
        self.num_samples = (len(self.train) - 1) // seq_length
        if self.num_samples < 1:
            raise TrainerError(f"{path}: not enough text for one sample of --seq-length {seq_length}")
        self._perm_epoch, self._perm = None, None

    @staticmethod
    def _stream(tok, rows):
        ids = []
        for r in rows:
            ids += tok.encode(str(r["text"])) + [tok.eod]
        return torch.tensor(ids, dtype=torch.long)

    def sample(self, k: int) -> torch.Tensor:
        epoch, i = divmod(k, self.num_samples)
        if epoch != self._perm_epoch:
            g = torch.Generator().manual_seed(self.seed * 1000003 + epoch)
            self._perm, self._perm_epoch = torch.randperm(self.num_samples, generator=g), epoch
        j = int(self._perm[i]) * self.seq
        return self.train[j:j + self.seq + 1]

    def batch(self, start: int, n: int) -> torch.Tensor:
        return torch.stack([self.sample(k) for k in range(start, start + n)])

    def valid_batches(self, n_batches: int, mbs: int, stream=None):
        """The first n_batches batches of a held-out split (the validation one unless given)."""
        stream = self.valid if stream is None else stream
        n = max(1, (len(stream) - 1) // self.seq)
        for b in range(n_batches):
            idx = [(b * mbs + i) % n for i in range(mbs)]
            yield torch.stack([stream[j * self.seq:j * self.seq + self.seq + 1] for j in idx])


def lm_loss(model, batch, device):
    batch = batch.to(device)
    logits = model(batch[:, :-1])
    if logits.is_cuda:  # the same FP32 loss through the fused kernel: one [tokens, vocab] FP32 tensor, not three
        return F.cross_entropy(logits.float().flatten(0, 1), batch[:, 1:].flatten())
    return -token_logprobs(logits, batch[:, 1:]).mean()


def flops_per_sample(cfg, seq):
    """6 * params * tokens + attention (Megatron's num_floating_point_operations, simplified)."""
    n = sum([cfg.hidden_size * (cfg.num_attention_heads + 2 * cfg.num_query_groups) * cfg.head_dim,
             cfg.hidden_size * cfg.hidden_size, 3 * cfg.hidden_size * cfg.ffn_hidden_size]) * cfg.num_layers
    n += cfg.hidden_size * cfg.vocab_size
    return 6.0 * n * seq + 12.0 * cfg.num_layers * cfg.hidden_size * seq * seq


def run(args, device):
    seed_all(args.seed)
    prec = precision_from_args(args)
    data = PretrainData(args.data_path, args.seq_length, args.seed, args.split)
    cfg = model_config_from_args(args)
    if args.seq_length > cfg.max_position_embeddings:
        raise TrainerError("--seq-length must not exceed --max-position-embeddings")
    state = State()
    it = resolve_load(args)
    model = build_model(cfg, prec, device, args.seed)
    optimizer = build_optimizer(model, args)
    gbs, mbs = args.global_batch_size, args.micro_batch_size
    scheduler = build_scheduler(optimizer, args, args.train_iters, gbs)

    if it is not None:
        parts = read_parts(args.load, it)
        ck_cfg = load_model_config(parts["common"], args.load)
        diff = [k for k, v in cfg.to_dict().items() if k != "init_method_std" and ck_cfg.to_dict()[k] != v]
        if diff:
            raise TrainerError(f"model arguments differ from the checkpoint in {args.load}: {', '.join(diff)}")
        load_weights(model, parts["model"], args.load)
        if args.finetune:
            log(f" > finetune: loaded the model of iteration {it}, iteration and optimizer start fresh")
        else:
            restore_training_state(parts, state, optimizer, scheduler, args, args.load)
    elif args.pretrained_checkpoint:  # only when --load has no tracker, and always as finetune (model only)
        pit = latest_of(args.pretrained_checkpoint, "--pretrained-checkpoint")
        parts = read_parts(args.pretrained_checkpoint, pit, parts=("common", "model"))
        load_model_config(parts["common"], args.pretrained_checkpoint)
        load_weights(model, parts["model"], args.pretrained_checkpoint)

    log(f" > model: {model.num_params()} parameters, {cfg.num_layers} layers, hidden {cfg.hidden_size}, "
        f"precision {prec.describe()}, device {device}")
    log(kernels_log(prec, device))
    log(f" > data: {data.num_samples} training samples of {args.seq_length} tokens from {args.data_path}")
    n_micro = gbs // mbs

    def step():
        model.train()
        optimizer.zero_grad(set_to_none=True)
        total = torch.zeros((), dtype=torch.float64, device=device)
        # Data parallel: this rank's share of the global batch; the all-reduce adds the other ranks' gradients.
        for m in dp.my_micro_batches(n_micro):
            loss = lm_loss(model, data.batch(state.consumed + m * mbs, mbs), device) / n_micro
            loss.backward()
            total += loss.detach().double()  # one device sync per step, not per micro-batch
        dp.all_reduce_grads(model)
        total = float(dp.sum_over_ranks(total))
        if total != total or total in (float("inf"), float("-inf")):
            optimizer.zero_grad(set_to_none=True)
            scheduler.step(gbs)  # Megatron counts a skipped iteration but still advances
            return {"loss": total, "nan": True, "grad_norm": None, "samples": gbs}
        norm = clip_grads(model, args.clip_grad)
        optimizer.step()
        scheduler.step(gbs)
        return {"loss": total, "grad_norm": norm, "samples": gbs}

    def evaluate(prefix, stream=None):
        model.eval()
        with torch.no_grad():
            losses = [float(lm_loss(model, b, device)) for b in data.valid_batches(args.eval_iters, mbs, stream)]
        log(validation_log(prefix, sum(losses) / len(losses)))

    def periodic(iteration):
        if data.valid is not None:
            evaluate(f"iteration {iteration}")

    end = train_loop(args, "pretrain", state, args.train_iters, gbs, model, optimizer, scheduler, step,
                     flops_per_sample(cfg, args.seq_length), on_eval=periodic,
                     resumed_in_save_dir=it is not None and not args.finetune and same_dir(args.load, args.save))
    # Megatron's pretrain() after train() (training.py:746–775): the end of training, never an early exit.
    if end == "done":
        if data.valid is not None:
            evaluate(f"iteration {state.iteration} on validation set")
        if data.test is not None:
            evaluate(f"iteration {state.iteration} on test set", data.test)
    return end
