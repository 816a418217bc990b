"""convert-hf / convert-fp8: Qwen2 config, exact weights, the FP8 export within the format's error, loads back,
generates, and is evaluated."""
import json
import os

import torch

from conftest import DATA, ok, run
from infir2_trainer import checkpoint as ckpt
from infir2_trainer.convert import load_hf
from infir2_trainer.fp8 import E4M3_TABLE
from infir2_trainer.generate import generate
from infir2_trainer.model import GPTModel, ModelConfig
from infir2_trainer.safetensors_io import load_file, read_header
from infir2_trainer.tokenizer import Tokenizer


def test_hf_export_and_fp8_export(tmp_path, cpt_root):
    it_dir = ckpt.iter_dir(cpt_root, 8)
    hf, hf32, f8 = str(tmp_path / "hf"), str(tmp_path / "hf32"), str(tmp_path / "fp8")
    ok(run(["convert-hf", "--input-dir", it_dir, "--output-dir", hf, "--vocab-size", "201"]))
    ok(run(["convert-hf", "--input-dir", it_dir, "--output-dir", hf32, "--dtype", "float32"]))
    cfg = json.load(open(os.path.join(hf, "config.json")))
    for key, want in [("model_type", "qwen2"), ("rope_theta", 500.0), ("vocab_size", 201),
                      ("tie_word_embeddings", True), ("rms_norm_eps", 1e-6), ("hidden_size", 32),
                      ("num_key_value_heads", 2), ("intermediate_size", 64), ("num_hidden_layers", 2)]:
        assert cfg[key] == want, key
    for f in ("model.safetensors", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
              "generation_config.json"):
        assert os.path.isfile(os.path.join(hf, f)), f
    tensors, dtypes, _ = load_file(os.path.join(hf, "model.safetensors"))
    assert tensors["model.embed_tokens.weight"].shape == (201, 32) and dtypes["model.embed_tokens.weight"] == "BF16"
    assert tensors["model.layers.0.self_attn.q_proj.weight"].shape == (32, 32)
    assert tensors["model.layers.0.self_attn.k_proj.bias"].shape == (16,)

    # the FP32 export reproduces the checkpoint's logits exactly (the split/fuse of qkv and fc1 is lossless)
    parts = ckpt.load(cpt_root, 8, parts=("common", "model"), log=lambda m: None)
    ref = GPTModel(ModelConfig(**parts["common"]["model_config"]))
    ref.load_state_dict(parts["model"])
    m32, _ = load_hf(hf32)
    m32.prec = ref.prec
    ids = torch.tensor([Tokenizer().chat_prompt("37+4=?")])
    assert torch.equal(ref(ids), m32(ids))

    ok(run(["convert-fp8", "--input-bf16-hf-path", hf, "--output-fp8-hf-path", f8, "--block-size", "16"]))
    cfg8 = json.load(open(os.path.join(f8, "config.json")))
    assert cfg8["quantization_config"] == {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                           "weight_block_size": [16, 16]}
    header, _ = read_header(os.path.join(f8, "model.safetensors"))
    q8, d8, _ = load_file(os.path.join(f8, "model.safetensors"))
    name = "model.layers.1.mlp.gate_proj.weight"  # [64, 32] -> 4 x 2 blocks of 16
    assert header[name]["dtype"] == "F8_E4M3" and header[name + "_scale_inv"]["dtype"] == "F32"
    assert q8[name + "_scale_inv"].shape == (4, 2)
    assert d8["model.embed_tokens.weight"] == "BF16" and d8["model.norm.weight"] == "BF16"
    assert "model.embed_tokens.weight_scale_inv" not in q8
    for n, t in tensors.items():
        if n + "_scale_inv" not in q8:
            continue
        w = t.float()
        s = q8[n + "_scale_inv"].float()
        m, e = torch.frexp(s)
        assert torch.all(m == 0.5)  # power-of-two scales (the default --force-pow-2-scale true)
        deq = E4M3_TABLE[q8[n].long()] * s.repeat_interleave(16, 0).repeat_interleave(16, 1)[:w.shape[0], :w.shape[1]]
        smax = s.repeat_interleave(16, 0).repeat_interleave(16, 1)[:w.shape[0], :w.shape[1]]
        err = (deq - w).abs()
        # E4M3 RNE: half an ulp = 2^-4 relative for normal values, 2^-10 * scale absolute in the subnormal range
        assert torch.all(err <= torch.maximum(w.abs() * 2.0 ** -4, smax * 2.0 ** -10) + 1e-12), n
        blk = w.abs().view(-1, 16, w.shape[1] // 16, 16).amax(dim=(1, 3)) if w.shape[0] % 16 == 0 else None
        if blk is not None:
            assert torch.all(blk / s <= 448.0) and torch.all(blk / s > 112.0)  # amax/x_s in (448/4, 448]

    # it loads back and generates, and eval reads it
    model, info = load_hf(f8)
    assert info["fp8"] and model.prec.fp8 == "e4m3" and model.prec.weights_prequantized
    tok = Tokenizer()
    out, _ = generate(model, [tok.chat_prompt("37+4=?")], 12, tok.im_end, tok.pad, temperature=0)
    assert len(out[0]) > 0
    report = str(tmp_path / "r.json")
    ok(run(["eval", "--model-path", f8, "--data-path", os.path.join(DATA, "eval_arith.jsonl"), "--n-samples",
            "2", "--max-tokens", "16", "--output", report]))
    r = json.load(open(report))
    assert {"benchmark", "model_path", "accuracy", "n_samples", "num_problems", "temperature", "top_p",
            "max_tokens"} <= set(r)
    assert r["benchmark"] == "arith" and r["num_problems"] == 140 and r["n_samples"] == 2
    assert r["temperature"] == 0.65 and r["top_p"] == 0.95 and 0.0 <= r["accuracy"] <= 1.0

    ok(run(["convert-fp8", "--input-bf16-hf-path", hf, "--output-fp8-hf-path", f8, "--block-size", "16",
            "--force", "--force-pow-2-scale", "false"]))
    s = load_file(os.path.join(f8, "model.safetensors"))[0][name + "_scale_inv"]
    assert not torch.all(torch.frexp(s)[0] == 0.5)  # "false" really means false (the original tool's bug)
