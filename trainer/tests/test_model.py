"""Generation with a KV cache and left padding computes what a plain forward computes."""
import torch

from infir2_trainer.fp8 import Precision
from infir2_trainer.generate import generate
from infir2_trainer.model import GPTModel, ModelConfig


def test_kv_cache_and_left_padding_match_full_forward():
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=64, num_layers=2, hidden_size=32, ffn_hidden_size=64, num_attention_heads=4,
                      num_query_groups=2, max_position_embeddings=64, init_method_std=0.2)
    model = GPTModel(cfg, Precision())
    model.init_weights(3)
    model.eval()
    prompts = [[5, 6, 7, 8, 9, 10], [11, 12], [13, 14, 15]]
    out, _ = generate(model, prompts, 6, eos_id=1, pad_id=0, temperature=0)
    for p, o in zip(prompts, out):  # greedy continuation recomputed without cache or padding, one at a time
        seq = list(p)
        for _ in range(len(o)):
            with torch.no_grad():
                seq.append(int(model(torch.tensor([seq]))[0, -1].argmax()))
        assert seq[len(p):] == o


def test_fp8_model_trains():
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=32, num_layers=1, hidden_size=32, ffn_hidden_size=32, num_attention_heads=2,
                      num_query_groups=1, max_position_embeddings=32, init_method_std=0.1)
    model = GPTModel(cfg, Precision(bf16=True, fp8="e4m3", block=16))
    model.init_weights(0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    x = torch.randint(2, 32, (8, 17))
    first = None
    for _ in range(30):
        logits = model(x[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 32), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = first or loss.item()
    assert loss.item() < first - 0.5
    assert all(p.dtype == torch.float32 for p in model.parameters())  # FP32 master weights
