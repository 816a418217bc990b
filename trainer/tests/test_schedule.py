"""Megatron's OptimizerParamScheduler: the WSD formula (docs/fp8-numerics.md §5), units, override rules."""
import math

import pytest
import torch

from infir2_trainer.schedule import OptimizerParamScheduler, SchedulerMismatch


def sched(style="WSD", wsd_style="cosine", warmup=10, decay=100, wsd=20, gbs=4, **kw):
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=0.0)
    return OptimizerParamScheduler(opt, init_lr=0.0, max_lr=1e-3, min_lr=1e-4, lr_warmup_steps=warmup * gbs,
                                   lr_decay_steps=decay * gbs, lr_decay_style=style, start_wd=0.1, end_wd=0.1,
                                   wsd_decay_steps=wsd * gbs, lr_wsd_decay_style=wsd_style, **kw), opt


def wsd_formula(it, style, warmup=10, decay=100, wsd=20, max_lr=1e-3, min_lr=1e-4):
    """Written from the doc, in iterations (the scheduler works in samples = iterations * GBS)."""
    if warmup > 0 and it <= warmup:
        return max_lr * it / warmup
    if it > decay:
        return min_lr
    start = decay - wsd
    if it <= start:
        coeff = 1.0
    else:
        r = (it - start) / wsd
        coeff = {"linear": 1 - r, "cosine": 0.5 * (math.cos(math.pi * r) + 1), "exponential": 2 * 0.5 ** r - 1,
                 "minus_sqrt": 1 - math.sqrt(r)}[style]
    return min_lr + coeff * (max_lr - min_lr)


@pytest.mark.parametrize("style", ["linear", "cosine", "exponential", "minus_sqrt"])
def test_wsd_values_match_formula(style):
    s, opt = sched(wsd_style=style)
    # the constructor calls step(0): update i (0-based) runs at lr(i * GBS)
    assert opt.param_groups[0]["lr"] == 0.0
    for it in range(0, 110):
        assert s.get_lr() == pytest.approx(wsd_formula(it, style), rel=1e-12, abs=1e-15), it
        s.step(4)


def test_phase_boundaries():
    s, _ = sched()
    s.num_steps = 10 * 4
    assert s.get_lr() == pytest.approx(1e-3)  # end of warmup
    s.num_steps = 80 * 4
    assert s.get_lr() == pytest.approx(1e-3)  # last stable step
    s.num_steps = 100 * 4
    assert s.get_lr() == pytest.approx(1e-4)  # end of decay
    s.num_steps = 101 * 4
    assert s.get_lr() == 1e-4


def test_cosine_linear_constant():
    for style, mid in [("cosine", 1e-4 + 0.5 * 0.9e-3), ("linear", 1e-4 + 0.5 * 0.9e-3), ("constant", 1e-3)]:
        s, _ = sched(style=style, warmup=0)
        s.num_steps = 50 * 4
        assert s.get_lr() == pytest.approx(mid)


def test_resume_checks_and_override():
    s, _ = sched()
    s.step(37 * 4)
    sd = s.state_dict()
    same, _ = sched()
    same.load_state_dict(sd)
    assert same.num_steps == sd["num_steps"] and same.get_lr() == s.get_lr()
    other, _ = sched(decay=200)
    with pytest.raises(SchedulerMismatch):  # Megatron asserts when arguments and checkpoint disagree
        other.load_state_dict(sd)
    forked, _ = sched(decay=200, warmup=0, override_opt_param_scheduler=True)
    forked.load_state_dict(sd)  # decay fork: the new lengths, the checkpoint's position
    assert forked.num_steps == 37 * 4 and forked.lr_decay_steps == 200 * 4 and forked.lr_warmup_steps == 0
