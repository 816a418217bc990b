"""The lines the orchestrator reads, printed as Megatron core_v0.14.0 prints them (training.py): validation
every --eval-interval as `validation loss at iteration N | …`, and only when training ends `… on validation set`
and `… on test set`; a loss left out where Megatron leaves it out; the skipped/NaN counts per interval."""
import math
import re

from conftest import ok, pretrain_args, run
from infir2_trainer.logs import training_log, validation_log
from infir2_trainer.train_pretrain import split_bounds

# evaluate_and_print_results: f' validation{suffix} loss at {prefix} | ' + '{} value: {:.6E} | {} PPL: {:.6E} | '
VALIDATION = re.compile(r"^ validation loss at (iteration (\d+)(?: on (validation|test) set)?) \| "
                        r"lm loss value: (\d\.\d{6}E[+-]\d\d) \| lm loss PPL: (\d\.\d{6}E[+-]\d\d) \| $")


def held_out(stdout):
    """(prefix, loss) of every validation line, each between two dashed rules of its length + 1."""
    lines = stdout.splitlines()
    out = []
    for i, line in enumerate(lines):
        m = VALIDATION.match(line)
        if m:
            assert lines[i - 1] == lines[i + 1] == "-" * (len(line) + 1), line
            out.append((m.group(1), float(m.group(4))))
    return out


def test_periodic_validation_then_the_final_validation_and_test_lines(tmp_path):
    p = ok(run(pretrain_args(str(tmp_path / "c"), iters=6, extra=["--eval-interval", "3", "--eval-iters", "2",
                                                                 "--split", "969,30,1"])))
    assert [x[0] for x in held_out(p.stdout)] == ["iteration 3", "iteration 6", "iteration 6 on validation set",
                                                 "iteration 6 on test set"]
    assert "on validation set" not in p.stdout.split("[after training is done]")[0]


def test_no_final_lines_after_an_exit_interval_and_no_test_line_without_a_test_split(tmp_path):
    root = str(tmp_path / "c")
    p = ok(run(pretrain_args(root, iters=6, extra=["--eval-interval", "2", "--exit-interval", "4"])))
    assert [x[0] for x in held_out(p.stdout)] == ["iteration 2", "iteration 4"]
    p = ok(run(pretrain_args(root, iters=6, extra=["--eval-interval", "2"])))  # resumed from 4, runs to the end
    assert [x[0] for x in held_out(p.stdout)] == ["iteration 6", "iteration 6 on validation set"]


def test_the_line_formats_byte_for_byte():
    # The real run's line (docs/real-engines.md) with the PPL of its printed, rounded loss.
    assert validation_log("iteration 20", 7.569757) == "\n".join([
        "-" * 94, " validation loss at iteration 20 | lm loss value: 7.569757E+00 | lm loss PPL: 1.938669E+03 | ",
        "-" * 94])
    line = training_log(10, 40, 80, 35.4, 1.9, 9.55436e-05, 8, {"lm loss": 8.13204}, 0.896, 0, 0)
    assert line.endswith(" iteration       10/      40 | consumed samples:           80 | elapsed time per iteration "
                         "(ms): 35.4 | throughput per GPU (TFLOP/s/GPU): 1.9 | learning rate: 9.554360E-05 | global "
                         "batch size:     8 | lm loss: 8.132040E+00 | loss scale: 1.0 | grad norm: 0.896 | number of "
                         "skipped iterations:   0 | number of nan iterations:   0 |")
    # Megatron prints no loss for an interval of skipped/NaN iterations (`if avg > 0.0`), never `NAN`.
    nan = training_log(30, 40, 240, 35.0, 0.0, 8e-05, 8, {"lm loss": math.nan}, None, 10, 10)
    assert "lm loss" not in nan and "NAN" not in nan and "grad norm" not in nan
    assert nan.endswith("| loss scale: 1.0 | number of skipped iterations:  10 | number of nan iterations:  10 |")


def test_nan_iterations_are_counted_per_interval_and_print_no_loss(tmp_path):
    p = ok(run(pretrain_args(str(tmp_path / "c"), iters=6, extra=["--lr", "1e30", "--clip-grad", "0"])))
    lines = [ln for ln in p.stdout.splitlines() if "consumed samples:" in ln]
    counts = [int(re.search(r"number of nan iterations:\s+(\d+)", ln).group(1)) for ln in lines]
    # Once the weights are NaN every iteration is: 1 a line at --log-interval 1, never a running total.
    assert counts[-3:] == [1, 1, 1] and set(counts) == {0, 1}, counts
    assert all("lm loss" not in ln and "NAN" not in ln for ln, c in zip(lines, counts) if c)


def test_split_bounds_are_megatrons():
    # [0, round(.969 n)), [.., round(.999 n)), [.., n): 1200 documents -> 1163 train, 36 validation, 1 test
    assert split_bounds(1200, "969,30,1") == (1163, 1199)
    assert split_bounds(1200, "98,2") == (1176, 1200)
    assert split_bounds(1200, None) == (1164, 1200)  # without --split: the last 3% validate, none test
    assert split_bounds(10, "1,1,1") == (3, 7)
