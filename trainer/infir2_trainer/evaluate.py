"""`eval`: what evalscope does against an SGLang server, locally: n samples per problem at the given temperature
and top-p, the answer read after the last </think> (evalscope's `remove_until "</think>"`), accuracy = avg@n
(mean over problems of the fraction of correct samples). Writes a JSON report.
"""
import json
import os
import time

import torch

from . import data as data_mod
from .convert import load_hf
from .generate import generate
from .runtime import TrainerError
from .tokenizer import Tokenizer


def run(args, device):
    t0 = time.time()
    try:
        rows = data_mod.read_jsonl(args.data_path, ["prompt", "label"])
    except (OSError, ValueError) as e:
        raise TrainerError(str(e)) from None
    model, info = load_hf(args.model_path, device)
    tok = Tokenizer()
    benchmark = args.benchmark or os.path.splitext(os.path.basename(args.data_path))[0].replace("eval_", "")
    prompts = [tok.chat_prompt(str(r["prompt"])) for r in rows for _ in range(args.n_samples)]
    room = model.cfg.max_position_embeddings - max(len(p) for p in prompts)
    if room < 1:
        raise TrainerError("prompts do not fit --max-position-embeddings")
    gen = torch.Generator().manual_seed(args.seed)
    responses, finished = generate(model, prompts, min(args.max_tokens, room), tok.im_end, tok.pad,
                                   temperature=args.temperature, top_p=args.top_p, gen=gen,
                                   batch_size=args.batch_size)
    per_problem = []
    for i, r in enumerate(rows):
        outs = [tok.decode(x) for x in responses[i * args.n_samples:(i + 1) * args.n_samples]]
        correct = [data_mod.is_correct(o, str(r["label"])) for o in outs]
        per_problem.append(sum(correct) / len(correct))
    accuracy = sum(per_problem) / len(per_problem)
    report = {
        "benchmark": benchmark,
        "model_path": os.path.abspath(args.model_path),
        "accuracy": accuracy,
        "n_samples": args.n_samples,
        "num_problems": len(rows),
        "temperature": args.temperature,
        "top_p": args.top_p,
        "max_tokens": args.max_tokens,
        "seed": args.seed,
        "precision": info["precision"].describe(),
        "truncated_ratio": 1.0 - sum(finished) / max(len(finished), 1),
        "mean_response_tokens": sum(len(x) for x in responses) / max(len(responses), 1),
        "example": {"prompt": str(rows[0]["prompt"]), "response": tok.decode(responses[0]),
                    "label": str(rows[0]["label"])},
        "elapsed_s": round(time.time() - t0, 2),
    }
    out_dir = os.path.dirname(os.path.abspath(args.output))
    try:
        os.makedirs(out_dir, exist_ok=True)
        tmp = args.output + ".tmp"
        with open(tmp, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
        os.replace(tmp, args.output)
    except OSError as e:
        raise TrainerError(f"cannot write report {args.output}: {e.strerror or e}") from None
    print(f"{benchmark}: accuracy {accuracy:.4f} (avg@{args.n_samples}, {len(rows)} problems, "
          f"T={args.temperature}, top_p={args.top_p}, {info['precision'].describe()}) -> {args.output}", flush=True)
