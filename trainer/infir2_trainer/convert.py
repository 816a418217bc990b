"""`convert-hf` and `convert-fp8`: the two conversion tools of the recipe, and the HF loader eval/RL use.

convert-hf  (tools/convert_torch_dist_to_hf.py): one iter_XXXXXXX directory -> an HF Qwen2 directory:
            config.json (Qwen2 keys), model.safetensors (BF16), tokenizer files, generation_config.json.
            MCore's fused tensors are split as slime's converter does: linear_qkv per query group into q/k/v,
            linear_fc1 into gate/up. --vocab-size trims Megatron's vocabulary padding.
convert-fp8 (tools/bf16_cast_fp8.py, with its two defects fixed: `fmt` is written, and
            `--force-pow-2-scale false` means false): every 2-D tensor except the embedding and the LM head
            becomes E4M3 in BxB blocks with `<name>_scale_inv` = amax/448 per block (rounded up to a power of
            two by default), the DeepSeek-V3 / SGLang block-FP8 layout.
"""
import json
import os
import shutil

import torch

from . import checkpoint as ckpt
from .fp8 import E4M3, Precision, e4m3_to_bytes, round_to_fp8
from .model import GPTModel, ModelConfig
from .runtime import TrainerError
from .safetensors_io import decode, load_file, save_file
from .tokenizer import Tokenizer
from .training import TOKENIZER_ID, load_model_config

SAFETENSORS = "model.safetensors"


def _prepare_output(out_dir: str, force: bool, src: str):
    if os.path.abspath(out_dir) == os.path.abspath(src):
        raise TrainerError("the output directory must differ from the input")
    if os.path.exists(out_dir):
        if not force:
            raise TrainerError(f"output directory {out_dir} exists (pass --force to overwrite)")
        if not os.path.isdir(out_dir):
            raise TrainerError(f"output path {out_dir} exists and is not a directory")
        shutil.rmtree(out_dir)
    try:
        os.makedirs(out_dir)
    except OSError as e:
        raise TrainerError(f"cannot create {out_dir}: {e.strerror or e}") from None


def _write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


# ---------------------------------------------------------------------------------------------------------------
# MCore <-> HF Qwen2 names

def mcore_to_hf(state: dict, cfg: ModelConfig) -> dict:
    G, hd, H, F = cfg.num_query_groups, cfg.head_dim, cfg.num_attention_heads, cfg.ffn_hidden_size
    per = H // G
    out = {"model.embed_tokens.weight": state["embedding.word_embeddings.weight"],
           "model.norm.weight": state["decoder.final_layernorm.weight"]}
    if cfg.untie_embeddings_and_output_weights:
        out["lm_head.weight"] = state["output_layer.weight"]
    for i in range(cfg.num_layers):
        src, dst = f"decoder.layers.{i}.", f"model.layers.{i}."
        out[dst + "input_layernorm.weight"] = state[src + "self_attention.linear_qkv.layer_norm_weight"]
        for kind in ("weight", "bias"):
            t = state[src + f"self_attention.linear_qkv.{kind}"]
            t = t.view(G, per + 2, hd, -1) if kind == "weight" else t.view(G, per + 2, hd)
            out[dst + f"self_attn.q_proj.{kind}"] = t[:, :per].reshape(H * hd, *t.shape[3:])
            out[dst + f"self_attn.k_proj.{kind}"] = t[:, per].reshape(G * hd, *t.shape[3:])
            out[dst + f"self_attn.v_proj.{kind}"] = t[:, per + 1].reshape(G * hd, *t.shape[3:])
        out[dst + "self_attn.o_proj.weight"] = state[src + "self_attention.linear_proj.weight"]
        out[dst + "post_attention_layernorm.weight"] = state[src + "mlp.linear_fc1.layer_norm_weight"]
        fc1 = state[src + "mlp.linear_fc1.weight"]
        out[dst + "mlp.gate_proj.weight"], out[dst + "mlp.up_proj.weight"] = fc1[:F], fc1[F:]
        out[dst + "mlp.down_proj.weight"] = state[src + "mlp.linear_fc2.weight"]
    return out


def hf_to_mcore(hf: dict, cfg: ModelConfig) -> dict:
    G, hd, H = cfg.num_query_groups, cfg.head_dim, cfg.num_attention_heads
    per = H // G
    st = {"embedding.word_embeddings.weight": hf["model.embed_tokens.weight"],
          "decoder.final_layernorm.weight": hf["model.norm.weight"]}
    if cfg.untie_embeddings_and_output_weights:
        st["output_layer.weight"] = hf["lm_head.weight"]
    for i in range(cfg.num_layers):
        src, dst = f"model.layers.{i}.", f"decoder.layers.{i}."
        st[dst + "self_attention.linear_qkv.layer_norm_weight"] = hf[src + "input_layernorm.weight"]
        for kind in ("weight", "bias"):
            q, k, v = (hf[src + f"self_attn.{n}_proj.{kind}"] for n in "qkv")
            tail = q.shape[1:]
            fused = torch.cat([q.reshape(G, per, hd, *tail), k.reshape(G, 1, hd, *tail),
                               v.reshape(G, 1, hd, *tail)], dim=1)
            st[dst + f"self_attention.linear_qkv.{kind}"] = fused.reshape(-1, *tail)
        st[dst + "self_attention.linear_proj.weight"] = hf[src + "self_attn.o_proj.weight"]
        st[dst + "mlp.linear_fc1.layer_norm_weight"] = hf[src + "post_attention_layernorm.weight"]
        st[dst + "mlp.linear_fc1.weight"] = torch.cat([hf[src + "mlp.gate_proj.weight"],
                                                        hf[src + "mlp.up_proj.weight"]], dim=0)
        st[dst + "mlp.linear_fc2.weight"] = hf[src + "mlp.down_proj.weight"]
    return st


def qwen2_config(cfg: ModelConfig, vocab_size: int, dtype: str) -> dict:
    tok = Tokenizer()
    return {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.ffn_hidden_size,
        "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_query_groups,
        "max_position_embeddings": cfg.max_position_embeddings,
        "max_window_layers": cfg.num_layers,
        "rope_theta": cfg.rotary_base,
        "rms_norm_eps": cfg.norm_epsilon,
        "vocab_size": vocab_size,
        "tie_word_embeddings": not cfg.untie_embeddings_and_output_weights,
        "hidden_act": "silu",
        "initializer_range": cfg.init_method_std,
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "sliding_window": None,
        "use_cache": True,
        "bos_token_id": tok.eod,
        "eos_token_id": tok.im_end,
        "torch_dtype": dtype,
        "transformers_version": "4.43.1",
        "infir2_tokenizer": TOKENIZER_ID,
    }


def _write_hf_extras(out_dir: str):
    tok = Tokenizer()
    tok.save_pretrained(out_dir)
    _write_json(os.path.join(out_dir, "generation_config.json"),
                {"bos_token_id": tok.eod, "eos_token_id": [tok.im_end, tok.eod], "pad_token_id": tok.pad,
                 "do_sample": True, "temperature": 0.65, "top_p": 0.95})


# ---------------------------------------------------------------------------------------------------------------
# convert-hf

def to_hf(args):
    src = os.path.normpath(args.input_dir)
    name = os.path.basename(src)
    if not os.path.isdir(src):
        raise TrainerError(f"--input-dir {args.input_dir} does not exist")
    if not name.startswith("iter_"):
        hint = ""
        try:
            it = ckpt.read_tracker(src)
            if it is not None:
                hint = f" (its latest is {ckpt.iter_dir(src, it)})"
        except ckpt.CheckpointError:
            pass
        raise TrainerError(f"--input-dir must be an iter_XXXXXXX directory, got {args.input_dir}{hint}")
    try:
        iteration = int(name[len("iter_"):])
    except ValueError:
        raise TrainerError(f"--input-dir {args.input_dir}: cannot read the iteration from the name") from None
    if not os.path.isfile(os.path.join(src, "metadata.json")):
        raise TrainerError(f"--input-dir {args.input_dir} is incomplete (no metadata.json)")
    try:
        parts = ckpt.load(os.path.dirname(src), iteration, parts=("common", "model"), log=lambda m: None)
    except ckpt.CheckpointError as e:
        raise TrainerError(str(e)) from None
    cfg = load_model_config(parts["common"], src)
    state = parts["model"]
    vocab = cfg.vocab_size
    if args.vocab_size:
        if args.vocab_size > cfg.vocab_size:
            raise TrainerError(f"--vocab-size {args.vocab_size} exceeds the checkpoint's {cfg.vocab_size} rows")
        if args.vocab_size < Tokenizer().vocab_size:
            raise TrainerError(f"--vocab-size {args.vocab_size} is smaller than the tokenizer "
                               f"({Tokenizer().vocab_size} tokens)")
        vocab = args.vocab_size
    hf = mcore_to_hf(state, cfg)
    for key in ("model.embed_tokens.weight", "lm_head.weight"):
        if key in hf:
            hf[key] = hf[key][:vocab]
    dtype = torch.bfloat16 if args.dtype == "bfloat16" else torch.float32
    hf = {k: v.to(dtype).contiguous() for k, v in hf.items()}
    _prepare_output(args.output_dir, args.force, src)
    save_file(hf, os.path.join(args.output_dir, SAFETENSORS), metadata={"format": "pt"})
    _write_json(os.path.join(args.output_dir, "config.json"), qwen2_config(cfg, vocab, args.dtype))
    _write_hf_extras(args.output_dir)
    print(f"converted {src} (iteration {iteration}) to {args.output_dir}: {len(hf)} tensors, {args.dtype}, "
          f"vocab {vocab}", flush=True)


# ---------------------------------------------------------------------------------------------------------------
# convert-fp8

def _ceil_pow2(x: torch.Tensor) -> torch.Tensor:
    """2^ceil(log2 x), exactly (frexp instead of the tool's float log2, which can misround at powers of two)."""
    m, e = torch.frexp(x)
    return torch.ldexp(torch.ones_like(x), torch.where(m == 0.5, e - 1, e))


def quantize_weight_fp8(w: torch.Tensor, block: int, pow2: bool, eps: float = 1e-10):
    """InfiR2's `_blockwise_cast_to_fp8_triton`: per BxB block x_s = max(amax, eps) / 448 (pow2: rounded up),
    q = RNE_sat(x * (1 / x_s)). Returns (uint8 E4M3 codes [M, N], x_s [ceil(M/B), ceil(N/B)] FP32)."""
    w = w.float()
    m, n = w.shape
    mb, nb = -(-m // block), -(-n // block)
    wp = torch.zeros(mb * block, nb * block)
    wp[:m, :n] = w
    blocks = wp.view(mb, block, nb, block)
    amax = blocks.abs().amax(dim=(1, 3)).clamp(min=eps)
    x_s = amax / torch.full_like(amax, E4M3.max)  # true division, as the Triton kernel does
    bad = torch.isinf(amax) | torch.isnan(amax)
    x_s = torch.where(bad, torch.ones_like(x_s), x_s)
    if pow2:
        x_s = _ceil_pow2(x_s)
    s_inv = (1.0 / x_s).view(mb, 1, nb, 1)
    q = round_to_fp8(blocks * s_inv).reshape(mb * block, nb * block)[:m, :n]
    return e4m3_to_bytes(q), x_s


def dequantize_weight_fp8(codes: torch.Tensor, x_s: torch.Tensor, block: int) -> torch.Tensor:
    from .fp8 import e4m3_from_bytes
    q = e4m3_from_bytes(codes)
    s = x_s.float().repeat_interleave(block, 0).repeat_interleave(block, 1)[:q.shape[0], :q.shape[1]]
    return q * s


def _read_hf(path: str):
    cfg_path, st_path = os.path.join(path, "config.json"), os.path.join(path, SAFETENSORS)
    if not os.path.isdir(path):
        raise TrainerError(f"HF directory {path} does not exist")
    for p in (cfg_path, st_path):
        if not os.path.isfile(p):
            raise TrainerError(f"{path} is not an HF model directory ({os.path.basename(p)} missing)")
    try:
        with open(cfg_path) as f:
            config = json.load(f)
        tensors, dtypes, _ = load_file(st_path)
    except ValueError as e:
        raise TrainerError(f"corrupt HF directory {path}: {e}") from None
    return config, tensors, dtypes


def to_fp8(args):
    src, dst = args.input_bf16_hf_path, args.output_fp8_hf_path
    config, tensors, dtypes = _read_hf(src)
    if config.get("quantization_config"):
        raise TrainerError(f"{src} is already quantized ({config['quantization_config'].get('quant_method')})")
    B = args.block_size
    out, fp8_names = {}, []
    for name, t in tensors.items():
        if t.dim() == 2 and name not in ("model.embed_tokens.weight", "lm_head.weight"):
            codes, x_s = quantize_weight_fp8(decode(t, dtypes[name]), B, args.force_pow_2_scale)
            out[name] = codes
            fp8_names.append(name)
            out[name + "_scale_inv"] = x_s.to(torch.float16 if args.scale_dtype == "float16" else torch.float32)
        else:  # embedding, LM head and 1-D tensors (norms, qkv biases) stay as they are
            out[name] = t
    if args.scale_dtype == "float16":
        for name in fp8_names:
            if not torch.isfinite(out[name + "_scale_inv"]).all() or (out[name + "_scale_inv"] == 0).any():
                raise TrainerError(f"{name}: a block scale does not fit float16 (use --scale-dtype float32)")
    _prepare_output(dst, args.force, src)
    save_file(out, os.path.join(dst, SAFETENSORS), metadata={"format": "pt"}, fp8_names=set(fp8_names))
    config = dict(config)
    config["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                     "weight_block_size": [B, B]}
    _write_json(os.path.join(dst, "config.json"), config)
    for fname in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"):
        if os.path.isfile(os.path.join(src, fname)):
            shutil.copyfile(os.path.join(src, fname), os.path.join(dst, fname))
    print(f"quantized {len(fp8_names)} weights of {src} to E4M3 in {B}x{B} blocks "
          f"({'power-of-2' if args.force_pow_2_scale else 'FP32'} scales) -> {dst}", flush=True)


# ---------------------------------------------------------------------------------------------------------------
# Loading an HF directory (BF16 or FP8) for eval and RL

def load_hf(path: str, device="cpu"):
    """Returns (model, info). An FP8 directory is dequantised to its exact E4M3 x scale values and runs like
    SGLang's block-FP8 linear: weights as stored, activations quantised per token in 1xB groups (FP32 scales)."""
    config, tensors, dtypes = _read_hf(path)
    try:
        Tokenizer.from_pretrained(path)
    except (OSError, ValueError, KeyError) as e:
        raise TrainerError(f"{path}: unusable tokenizer ({e})") from None
    try:
        cfg = ModelConfig(vocab_size=config["vocab_size"], num_layers=config["num_hidden_layers"],
                          hidden_size=config["hidden_size"], ffn_hidden_size=config["intermediate_size"],
                          num_attention_heads=config["num_attention_heads"],
                          num_query_groups=config["num_key_value_heads"],
                          max_position_embeddings=config["max_position_embeddings"],
                          rotary_base=float(config["rope_theta"]), norm_epsilon=config["rms_norm_eps"],
                          untie_embeddings_and_output_weights=not config.get("tie_word_embeddings", True))
    except KeyError as e:
        raise TrainerError(f"{path}/config.json lacks {e}") from None
    qc = config.get("quantization_config")
    hf = {}
    if qc:
        if qc.get("quant_method") != "fp8" or qc.get("fmt", "e4m3") != "e4m3" or "weight_block_size" not in qc:
            raise TrainerError(f"{path}: unsupported quantization_config {qc}")
        B = int(qc["weight_block_size"][0])
        for name, t in tensors.items():
            if name.endswith("_scale_inv"):
                continue
            if dtypes[name] == "F8_E4M3":
                if name + "_scale_inv" not in tensors:
                    raise TrainerError(f"{path}: {name} has no {name}_scale_inv")
                hf[name] = dequantize_weight_fp8(t, tensors[name + "_scale_inv"], B)
            else:
                hf[name] = decode(t, dtypes[name])
        prec = Precision(bf16=True, fp8="e4m3", block=int(qc["weight_block_size"][1]), pow2=False,
                         weights_prequantized=True)
    else:
        hf = {n: decode(t, dtypes[n]) for n, t in tensors.items()}
        prec = Precision(bf16=True)
    model = GPTModel(cfg, prec)
    try:
        model.load_state_dict(hf_to_mcore(hf, cfg), strict=True)
    except (KeyError, RuntimeError) as e:
        raise TrainerError(f"{path}: weights do not match config.json ({' '.join(str(e).split())[:200]})") from None
    model.eval()
    return model.to(device), {"config": config, "fp8": bool(qc), "precision": prec}
