"""Megatron's OptimizerParamScheduler (megatron/core/optimizer_param_scheduler.py), same formulas, same units.

Steps are SAMPLES: warmup/decay lengths are iters * global batch size and every optimizer step advances
num_steps by the global batch size. The constructor calls step(0), so update i (0-based) uses lr(i * GBS): with
warmup the very first update uses lr = init_lr (0). The WSD phases of the CPT (warmup / stable / decay) are one
schedule stopped at boundaries with --exit-interval; a decay forked from a stable checkpoint uses
--override-opt_param-scheduler, which takes lengths/styles from the arguments and only num_steps from the
checkpoint. Without it (and without --use-checkpoint-opt_param-scheduler) a mismatch is an error, as in Megatron.
"""
import math


class SchedulerMismatch(Exception):
    pass


class OptimizerParamScheduler:
    def __init__(self, optimizer, init_lr, max_lr, min_lr, lr_warmup_steps, lr_decay_steps, lr_decay_style,
                 start_wd, end_wd, wd_incr_steps=1, wd_incr_style="constant", wsd_decay_steps=None,
                 lr_wsd_decay_style=None, use_checkpoint_opt_param_scheduler=False,
                 override_opt_param_scheduler=False):
        self.optimizer = optimizer
        self.init_lr, self.max_lr, self.min_lr = float(init_lr), float(max_lr), float(min_lr)
        self.lr_warmup_steps, self.lr_decay_steps = int(lr_warmup_steps), int(lr_decay_steps)
        self.lr_decay_style = lr_decay_style
        self.wsd_decay_steps, self.lr_wsd_decay_style = wsd_decay_steps, lr_wsd_decay_style
        self.start_wd, self.end_wd = float(start_wd), float(end_wd)
        self.wd_incr_steps, self.wd_incr_style = int(wd_incr_steps), wd_incr_style
        self.use_checkpoint = use_checkpoint_opt_param_scheduler
        self.override = override_opt_param_scheduler
        if self.lr_decay_steps <= 0:
            raise ValueError("lr decay steps must be positive (check --train-iters / --lr-decay-iters)")
        if self.lr_warmup_steps >= self.lr_decay_steps and self.lr_decay_style != "constant":
            raise ValueError("--lr-warmup-iters must be smaller than the decay length (--lr-decay-iters or --train-iters)")
        if lr_decay_style == "WSD" and not wsd_decay_steps:
            raise ValueError("--lr-decay-style WSD needs --lr-wsd-decay-iters")
        self.num_steps = 0
        self.step(0)

    def get_wd(self) -> float:
        if self.num_steps > self.wd_incr_steps or self.wd_incr_style == "constant":
            return self.end_wd
        ratio = float(self.num_steps) / float(self.wd_incr_steps)
        coeff = ratio if self.wd_incr_style == "linear" else 0.5 * (math.cos(math.pi * (1 - ratio)) + 1.0)
        return self.start_wd + coeff * (self.end_wd - self.start_wd)

    def get_lr(self) -> float:
        max_lr, min_lr = self.max_lr, self.min_lr
        if self.lr_warmup_steps > 0 and self.num_steps <= self.lr_warmup_steps:
            return self.init_lr + (max_lr - self.init_lr) * float(self.num_steps) / float(self.lr_warmup_steps)
        if self.lr_decay_style == "constant":
            return max_lr
        if self.num_steps > self.lr_decay_steps:
            return min_lr
        if self.lr_decay_style == "inverse-square-root":
            warmup = max(self.lr_warmup_steps, 1)
            lr = max_lr * warmup ** 0.5 / (max(self.num_steps, 1) ** 0.5)
            return max(min_lr, lr)
        num = self.num_steps - self.lr_warmup_steps
        den = self.lr_decay_steps - self.lr_warmup_steps
        ratio = float(num) / float(den)
        if self.lr_decay_style == "linear":
            coeff = 1.0 - ratio
        elif self.lr_decay_style == "cosine":
            coeff = 0.5 * (math.cos(math.pi * ratio) + 1.0)
        elif self.lr_decay_style == "WSD":
            anneal_start = self.lr_decay_steps - self.wsd_decay_steps
            if self.num_steps <= anneal_start:
                coeff = 1.0
            else:
                r = float(self.num_steps - anneal_start) / float(self.wsd_decay_steps)
                style = self.lr_wsd_decay_style
                if style == "linear":
                    coeff = 1.0 - r
                elif style == "cosine":
                    coeff = 0.5 * (math.cos(math.pi * r) + 1.0)
                elif style == "exponential":
                    coeff = (2.0 * math.pow(0.5, r)) - 1.0
                elif style == "minus_sqrt":
                    coeff = 1.0 - math.sqrt(r)
                else:
                    raise ValueError(f"unknown WSD decay style {style}")
        else:
            raise ValueError(f"unknown lr decay style {self.lr_decay_style}")
        return min_lr + coeff * (max_lr - min_lr)

    def step(self, increment: int):
        self.num_steps += increment
        lr, wd = self.get_lr(), self.get_wd()
        for group in self.optimizer.param_groups:
            group["lr"] = lr
            group["weight_decay"] = wd * group.get("wd_mult", 1.0)

    def state_dict(self) -> dict:
        return {"max_lr": self.max_lr, "lr_warmup_steps": self.lr_warmup_steps, "num_steps": self.num_steps,
                "lr_decay_style": self.lr_decay_style, "lr_decay_steps": self.lr_decay_steps, "min_lr": self.min_lr,
                "start_wd": self.start_wd, "end_wd": self.end_wd, "wd_incr_style": self.wd_incr_style,
                "wd_incr_steps": self.wd_incr_steps}

    def _check_and_set(self, cls_value, sd_value, name):
        if self.override:
            return cls_value
        if not self.use_checkpoint and cls_value != sd_value:
            raise SchedulerMismatch(
                f"OptimizerParamScheduler: class input value {cls_value} and checkpoint value {sd_value} for {name} "
                f"do not match (pass --override-opt_param-scheduler to take the new arguments, or "
                f"--use-checkpoint-opt_param-scheduler to keep the checkpoint's)")
        return sd_value

    def load_state_dict(self, sd: dict):
        self.max_lr = self._check_and_set(self.max_lr, sd["max_lr"], "learning rate")
        self.min_lr = self._check_and_set(self.min_lr, sd["min_lr"], "minimum learning rate")
        self.lr_warmup_steps = self._check_and_set(self.lr_warmup_steps, sd["lr_warmup_steps"], "warmup iterations")
        self.lr_decay_steps = self._check_and_set(self.lr_decay_steps, sd["lr_decay_steps"],
                                                  "total number of iterations")
        self.lr_decay_style = self._check_and_set(self.lr_decay_style, sd["lr_decay_style"],
                                                  "learning rate decay style")
        self.start_wd = self._check_and_set(self.start_wd, sd["start_wd"], "start weight decay")
        self.end_wd = self._check_and_set(self.end_wd, sd["end_wd"], "end weight decay")
        self.wd_incr_steps = self._check_and_set(self.wd_incr_steps, sd["wd_incr_steps"],
                                                 "total number of weight decay iterations")
        self.wd_incr_style = self._check_and_set(self.wd_incr_style, sd["wd_incr_style"],
                                                 "weight decay incr style")
        self.num_steps = 0
        self.step(increment=sd["num_steps"])
