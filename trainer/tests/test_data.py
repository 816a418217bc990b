"""make-data is deterministic and matches the committed files; splits are disjoint; the tokenizer round-trips."""
import filecmp
import json
import os

from conftest import DATA, ok, run
from infir2_trainer import data
from infir2_trainer.tokenizer import Tokenizer


def test_make_data_regenerates_committed_files(tmp_path):
    out = tmp_path / "data"
    p = ok(run(["make-data", "--out", str(out)]))
    assert "wrote" in p.stdout
    names = sorted(os.listdir(out))
    assert names == ["cpt.jsonl", "eval_arith.jsonl", "rl.jsonl", "sft_stage1.jsonl", "sft_stage2.jsonl"]
    for n in names:
        assert filecmp.cmp(out / n, os.path.join(DATA, n), shallow=False), f"{n} differs from trainer/data"
    total = sum(os.path.getsize(os.path.join(DATA, n)) for n in os.listdir(DATA))
    assert total < 2 * 1024 * 1024


def test_held_out_problems_appear_nowhere_else():
    evals = {json.loads(line)["prompt"] for line in open(os.path.join(DATA, "eval_arith.jsonl"))}
    assert len(evals) == 140
    for name in ("sft_stage1.jsonl", "sft_stage2.jsonl", "rl.jsonl", "cpt.jsonl"):
        text = open(os.path.join(DATA, name)).read()
        for q in evals:
            assert q not in text, (q, name)


def test_answers_and_grading():
    rows = [json.loads(line) for line in open(os.path.join(DATA, "eval_arith.jsonl"))]
    for r in rows:
        a, b = map(int, r["prompt"][:-2].split("+"))
        assert int(r["label"]) == a + b
        assert data.is_correct(data.solution((a, b)), r["label"])
        assert not data.is_correct(data.solution((a, b), sloppy=True), r["label"])
    assert data.extract_answer("no think tag 5") is None
    assert data.is_correct("<think>\nx\n</think>\n 42 <|im_end|>", "42")


def test_tokenizer_round_trip_and_files(tmp_path):
    t = Tokenizer()
    for s in ["<|im_start|>user\n37+4=?<|im_end|>\n", "1234 + 5 <think>x</think>", "a<b", "\n\n 0 00 007"]:
        assert t.decode(t.encode(s)) == s
    assert [t.id_to_token[i] for i in t.encode("123")] == ["12", "3"]
    ids, mask = t.chat_example([{"role": "user", "content": "1+2=?"}, {"role": "assistant", "content": "3"}])
    trained = t.decode([i for i, m in zip(ids, mask) if m])
    assert trained == "3<|im_end|>"
    t.save_pretrained(str(tmp_path))
    assert Tokenizer.from_pretrained(str(tmp_path)).vocab_size == t.vocab_size
