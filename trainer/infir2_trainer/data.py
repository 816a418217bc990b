"""The data: generated deterministically (make-data), committed under trainer/data/, read by every stage.

The task is two-digit addition by counting on, small enough for a 2-layer model to learn on a CPU in a minute
and verifiable like the recipe's math problems:

  question  "37+4=?"                     (a = 10..89, b = 1..8)
  answer    "<think>\\n4:37\\n3:38\\n2:39\\n1:40\\n0:41\\n</think>\\n41"

One reasoning line per step, "steps left:running total", starting from the question's numbers. With the
tokenizer's two-digit number tokens, every token of a line is a copy, a successor or a predecessor of one token
of the line above (or a copy from the question) at a fixed distance, which a 2-layer model learns in a few
hundred steps; running sums over characters ("17+8=25") need a memorised modular-addition table and took it
several times longer (measured while designing this). A larger b means a longer reasoning chain, which is what
the SFT stages and the RL length curriculum play with: the response to a b problem is 10 + 4b tokens (42 for
b = 8). See docs/local-trainer.md for the other choices (layout, sloppy teacher) and why.

  cpt.jsonl         pre-training corpus: worked problems, counting runs, +1 facts, as plain text
  sft_stage1.jsonl  chat conversations, b = 1..4 (short reasoning)
  sft_stage2.jsonl  chat conversations, b = 1..8, mostly 5..8 (long reasoning)
  rl.jsonl          {"prompt", "label"}: b = 2..8
  eval_arith.jsonl  held-out {"prompt", "label"}: b = 2..8, problems that appear in no other file
"""
import json
import os
import random

SEED = 20250101
N_CPT_DOCS = 1200
N_SFT1, N_SFT2, N_RL = 1000, 1000, 800
N_EVAL_PER_B = 20  # b = 2..8 -> 140 held-out problems
MAX_B = 8
# The SFT conversations come from a sloppy teacher, like distilled SFT data: one in four stops counting one step
# early ("...2:39\n1:40\n</think>\n40" for 37+4). SFT learns the habit along with the skill; RL with a verifiable
# reward is what removes it (the reason the recipe runs RL after SFT), which gives RL a measurable job on a CPU
# budget. (Sloppy final answers that disagree with the last line do not work: the 2-layer model's answer copy
# breaks down instead of learning the mixture; a sloppy stop keeps every copy clean.)
SLOPPY_FRACTION = 0.25


def question(p) -> str:
    a, b = p
    return f"{a}+{b}=?"


def answer(p) -> int:
    return p[0] + p[1]


def solution(p, sloppy: bool = False) -> str:
    """The reasoning, then the final answer (what the reward and eval read). A sloppy solution stops counting one
    step early and answers with where it stopped (see SLOPPY_FRACTION)."""
    a, b = p
    stop = 1 if sloppy else 0
    lines = [f"{left}:{a + b - left}" for left in range(b, stop - 1, -1)]
    return "<think>\n" + "\n".join(lines) + "\n</think>\n" + str(a + b - stop)


# In plain text the work starts as far from the question as it does in the chat template (15 tokens after the
# "?": <|im_end|> \n <|im_start|> "assistant\n" <think> \n) and the answer as far from the last line, so what CPT
# learns about reading the question and copying the result carries over to the chat format instead of being
# relearned in SFT (measured: these long-distance copies are what the tiny model learns last).
PLAIN_LEAD = " count on by 1\n"


def worked_text(p) -> str:
    lines = solution(p).split("\n")[1:-2]  # the reasoning lines, without <think> / </think> / answer
    return question(p) + PLAIN_LEAD + "\n".join(lines) + f"\n=\n{answer(p)}"  # "=" sits where </think> does


ALL = [(a, b) for b in range(1, MAX_B + 1) for a in range(10, 90)]


def _pick(rng, pool, n, bs):
    cands = [p for p in pool if p[1] in bs]
    return [rng.choice(cands) for _ in range(n)]


def _cpt_doc(rng, pool) -> str:
    """A pre-training document: worked problems, counting runs and facts, math-corpus style (no chat markup)."""
    lines = []
    for _ in range(rng.randint(3, 6)):
        r = rng.random()
        if r < 0.6:  # a worked problem (never a held-out one), as plain text
            lines.append(worked_text(rng.choice(pool)))
        elif r < 0.8:
            a = rng.randint(10, 90)
            lines.append(" ".join(str(a + i) for i in range(rng.randint(3, 9))))
        elif r < 0.9:
            a = rng.randint(10, 97)
            lines.append(f"{a}+1={a + 1}")
        else:
            a = rng.randint(10, 97)
            lines.append(f"after {a} comes {a + 1}.")
    return "\n".join(lines)


def generate(out_dir: str, seed: int = SEED) -> list:
    """Write every data file into out_dir; same seed, same bytes. Returns the file names."""
    rng = random.Random(seed)
    shuffled = ALL[:]
    rng.shuffle(shuffled)
    evals = []
    for b in range(2, MAX_B + 1):
        evals += [p for p in shuffled if p[1] == b][:N_EVAL_PER_B]
    held_out = set(evals)
    pool = [p for p in ALL if p not in held_out]  # everything the training files may use

    def conv(p):
        sloppy = rng.random() < SLOPPY_FRACTION
        return {"messages": [{"role": "user", "content": question(p)},
                             {"role": "assistant", "content": solution(p, sloppy)}]}

    long_bs = range(5, MAX_B + 1)
    files = {
        "cpt.jsonl": [{"text": _cpt_doc(rng, pool)} for _ in range(N_CPT_DOCS)],
        "sft_stage1.jsonl": [conv(p) for p in _pick(rng, pool, N_SFT1, range(1, 5))],
        "sft_stage2.jsonl": [conv(p) for p in _pick(rng, pool, N_SFT2 // 4, range(1, 5)) +
                             _pick(rng, pool, N_SFT2 - N_SFT2 // 4, long_bs)],
        "rl.jsonl": [{"prompt": question(p), "label": str(answer(p))}
                     for p in _pick(rng, pool, N_RL, range(2, MAX_B + 1))],
        "eval_arith.jsonl": [{"prompt": question(p), "label": str(answer(p))} for p in evals],
    }
    rng.shuffle(files["sft_stage2.jsonl"])
    os.makedirs(out_dir, exist_ok=True)
    for name, rows in files.items():
        with open(os.path.join(out_dir, name), "w", newline="\n") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=True, separators=(", ", ": ")) + "\n")
    return sorted(files)


# ---------------------------------------------------------------------------------------------------------------
# Readers (shared by the stages). Errors name the file and the line so a bad data path is a one-line error.

def read_jsonl(path: str, keys) -> list:
    if not path.endswith(".jsonl"):
        raise ValueError(f"data file must be a .jsonl file: {path}")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"data file not found: {path}")
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: invalid JSON ({e.msg})") from None
            missing = [k for k in keys if k not in row]
            if missing:
                raise ValueError(f"{path}:{n}: missing key(s) {', '.join(missing)}")
            rows.append(row)
    if not rows:
        raise ValueError(f"data file is empty: {path}")
    return rows


def extract_answer(response: str):
    """The text after the last </think> up to the end of the turn (evalscope `remove_until "</think>"`,
    slime's deepscaler reward); None when there is no </think>."""
    if "</think>" not in response:
        return None
    ans = response.rsplit("</think>", 1)[1]
    return ans.split("<|im_end|>", 1)[0].strip()


def is_correct(response: str, label: str) -> bool:
    ans = extract_answer(response)
    if ans is None:
        return False
    try:
        return int(ans) == int(label)
    except ValueError:
        return ans == label.strip()
