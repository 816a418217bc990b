"""A tiny Qwen2-style decoder laid out like Megatron-Core's GPTModel.

Qwen2 = RMSNorm (pre-norm), RoPE (rotate-half), grouped-query attention with a QKV bias, SwiGLU MLP, no other
biases, tied or untied embeddings. Parameter names and layouts follow MCore so the checkpoint looks like what
Megatron saves and `convert-hf` has real work to do (split the fused QKV per query group, the fused gate/up):

  embedding.word_embeddings.weight                            [vocab, h]
  decoder.layers.N.self_attention.linear_qkv.layer_norm_weight [h]          (TE fuses the RMSNorm into the linear)
  decoder.layers.N.self_attention.linear_qkv.{weight,bias}     per group g: [q heads of g; k_g; v_g]
  decoder.layers.N.self_attention.linear_proj.weight
  decoder.layers.N.mlp.linear_fc1.layer_norm_weight
  decoder.layers.N.mlp.linear_fc1.weight                       [gate; up]
  decoder.layers.N.mlp.linear_fc2.weight
  decoder.final_layernorm.weight
  output_layer.weight                                          only with --untie-embeddings-and-output-weights

The four linears of each layer run the recipe's FP8 GEMMs (fp8.linear); everything else stays BF16/FP32.
"""
import math
from dataclasses import asdict, dataclass, replace

import torch
import torch.nn as nn
import torch.nn.functional as F

from .fp8 import Precision, linear


@dataclass
class ModelConfig:
    vocab_size: int
    num_layers: int = 2
    hidden_size: int = 64
    ffn_hidden_size: int = 192
    num_attention_heads: int = 4
    num_query_groups: int = 2
    max_position_embeddings: int = 128
    rotary_base: float = 10000.0
    norm_epsilon: float = 1e-6
    untie_embeddings_and_output_weights: bool = False
    init_method_std: float = 0.02

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def to_dict(self) -> dict:
        return asdict(self)

    def validate(self):
        if self.hidden_size % self.num_attention_heads:
            raise ValueError("--hidden-size must be divisible by --num-attention-heads")
        if self.num_attention_heads % self.num_query_groups:
            raise ValueError("--num-attention-heads must be divisible by --num-query-groups")
        if self.head_dim % 2:
            raise ValueError("head dim (hidden / heads) must be even for RoPE")
        for name in ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups",
                     "max_position_embeddings", "vocab_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"--{name.replace('_', '-')} must be positive")


def rms_norm(x, weight, eps, prec: Precision):
    """RMSNorm with its statistics in FP32 (output FP32). The native path uses torch's fused kernel (one pass
    instead of six) on the same FP32 values; the emulation keeps the plain ops, bit for bit as before."""
    x = x.float()
    if prec.native and hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x, prec: Precision):
        return prec.act(rms_norm(x, self.weight, self.eps, prec))


class NormLinear(nn.Module):
    """TE LayerNormLinear: RMSNorm then a (FP8) linear. Holds `layer_norm_weight` next to `weight` as MCore does."""

    def __init__(self, dim_in, dim_out, eps, bias):
        super().__init__()
        self.eps = eps
        self.layer_norm_weight = nn.Parameter(torch.ones(dim_in))
        self.weight = nn.Parameter(torch.empty(dim_out, dim_in))
        self.bias = nn.Parameter(torch.zeros(dim_out)) if bias else None

    def forward(self, x, prec: Precision):
        h = prec.act(rms_norm(x, self.layer_norm_weight, self.eps, prec))
        return linear(h, self.weight, self.bias, prec)


class Linear(nn.Module):
    def __init__(self, dim_in, dim_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(dim_out, dim_in))

    def forward(self, x, prec: Precision):
        return linear(x, self.weight, None, prec)


def rope_cache(cfg: ModelConfig, device):
    inv = 1.0 / (cfg.rotary_base ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float64) / cfg.head_dim))
    t = torch.arange(cfg.max_position_embeddings, dtype=torch.float64)
    freqs = torch.outer(t, inv)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().float().to(device), emb.sin().float().to(device)


def apply_rope(x, cos, sin):
    """x [B, T, heads, d]; cos/sin [B, T, 1, d]. Qwen2/MCore rotate-half (non-interleaved) convention."""
    d = x.shape[-1] // 2
    rot = torch.cat([-x[..., d:], x[..., :d]], dim=-1)
    return x * cos + rot * sin


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        qkv_out = (cfg.num_attention_heads + 2 * cfg.num_query_groups) * cfg.head_dim
        self.linear_qkv = NormLinear(cfg.hidden_size, qkv_out, cfg.norm_epsilon, bias=True)  # --add-qkv-bias
        self.linear_proj = Linear(cfg.num_attention_heads * cfg.head_dim, cfg.hidden_size)

    def forward(self, x, cos, sin, mask, prec, cache=None):
        cfg = self.cfg
        B, T, _ = x.shape
        G, hd = cfg.num_query_groups, cfg.head_dim
        per = cfg.num_attention_heads // G
        qkv = self.linear_qkv(x, prec).view(B, T, G, per + 2, hd)
        q = qkv[:, :, :, :per].reshape(B, T, G * per, hd)
        k, v = qkv[:, :, :, per], qkv[:, :, :, per + 1]
        q, k = prec.act(apply_rope(q, cos, sin)), prec.act(apply_rope(k, cos, sin))
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, heads, T, hd]
        if cache is not None:  # generation: keys/values of earlier positions
            if cache.get("k") is not None:
                k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        k, v = k.repeat_interleave(per, dim=1), v.repeat_interleave(per, dim=1)
        if prec.native:  # fused attention (flash on CUDA in BF16; FP32 softmax inside); mask None = causal
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None)
            y = prec.act(y).transpose(1, 2).reshape(B, T, G * per * hd)
            return self.linear_proj(y, prec)
        att = (q.float() @ k.float().transpose(-1, -2)) * (1.0 / math.sqrt(hd))
        att = torch.softmax(att + mask, dim=-1)  # softmax in FP32 (--attention-softmax-in-fp32)
        y = prec.act(att @ v.float()).transpose(1, 2).reshape(B, T, G * per * hd)
        return self.linear_proj(y, prec)


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.linear_fc1 = NormLinear(cfg.hidden_size, 2 * cfg.ffn_hidden_size, cfg.norm_epsilon, bias=False)
        self.linear_fc2 = Linear(cfg.ffn_hidden_size, cfg.hidden_size)

    def forward(self, x, prec):
        gate, up = self.linear_fc1(x, prec).chunk(2, dim=-1)
        return self.linear_fc2(prec.act(F.silu(gate) * up), prec)


class Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.self_attention = Attention(cfg)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, mask, prec, cache=None):
        x = prec.act(x + self.self_attention(x, cos, sin, mask, prec, cache))
        return prec.act(x + self.mlp(x, prec))


class Embedding(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)


class Decoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layers = nn.ModuleList([Layer(cfg) for _ in range(cfg.num_layers)])
        self.final_layernorm = RMSNorm(cfg.hidden_size, cfg.norm_epsilon)


class GPTModel(nn.Module):
    def __init__(self, cfg: ModelConfig, prec: Precision = Precision()):
        super().__init__()
        cfg.validate()
        self.cfg, self.prec = cfg, prec
        self.embedding = Embedding(cfg)
        self.decoder = Decoder(cfg)
        self.output_layer = Linear(cfg.hidden_size, cfg.vocab_size) if cfg.untie_embeddings_and_output_weights \
            else None
        self._rope = None

    def init_weights(self, seed: int):
        """Megatron init: N(0, std) for weights, std/sqrt(2L) for the output projections, ones/zeros for norms/biases."""
        g = torch.Generator().manual_seed(seed)
        std, L = self.cfg.init_method_std, self.cfg.num_layers
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("layer_norm_weight") or "layernorm" in name:
                    p.fill_(1.0)
                elif name.endswith(".bias"):
                    p.zero_()
                else:
                    s = std / math.sqrt(2.0 * L) if name.endswith(("linear_proj.weight", "linear_fc2.weight")) else std
                    p.copy_(torch.randn(p.shape, generator=g) * s)


    def rope(self, device):
        if self._rope is None or self._rope[0].device != device:
            self._rope = rope_cache(self.cfg, device)
        return self._rope

    def forward(self, ids, position_ids=None, key_mask=None, caches=None):
        """ids [B, T] -> logits [B, T, vocab] (FP32).

        position_ids [B, T] (default 0..T-1); key_mask [B, S] bool over all S keys (cache + new), False = padding;
        caches: list of per-layer dicts for incremental decoding (None = a full causal forward).
        """
        prec = self.prec.on(ids.device)
        B, T = ids.shape
        past = 0 if not caches or caches[0].get("k") is None else caches[0]["k"].shape[2]
        S = past + T
        if position_ids is None:
            position_ids = torch.arange(past, S, device=ids.device).unsqueeze(0).expand(B, T)
        if int(position_ids.max()) >= self.cfg.max_position_embeddings:
            raise ValueError(f"sequence longer than --max-position-embeddings {self.cfg.max_position_embeddings}")
        cos_t, sin_t = self.rope(ids.device)
        cos, sin = cos_t[position_ids].unsqueeze(2), sin_t[position_ids].unsqueeze(2)
        q_idx = torch.arange(past, S, device=ids.device).view(T, 1)
        k_idx = torch.arange(S, device=ids.device).view(1, S)
        allowed = (k_idx <= q_idx).view(1, 1, T, S)
        if key_mask is not None:  # padding keys are invisible; a (padding) query always sees itself, so no row is
            allowed = allowed & (key_mask.view(B, 1, 1, S) | (k_idx == q_idx).view(1, 1, T, S))  # all -inf (NaN)
        if prec.native and key_mask is None and past == 0:
            mask = None  # plain causal: the fused kernel masks by itself, no [T, S] tensor
        else:
            mask = torch.zeros(allowed.shape, device=ids.device).masked_fill(~allowed, float("-inf"))
            if prec.native and prec.low:
                mask = mask.to(torch.bfloat16)  # SDPA wants the mask in the query's dtype

        x = prec.act(self.embedding.word_embeddings(ids).float())  # embeddings stay BF16, never FP8
        for i, layer in enumerate(self.decoder.layers):
            x = layer(x, cos, sin, mask, prec, caches[i] if caches else None)
        x = self.decoder.final_layernorm(x, prec)
        w = self.output_layer.weight if self.output_layer is not None else self.embedding.word_embeddings.weight
        # the LM head is never FP8: a BF16 GEMM (MCore's ColumnParallelLinear); the loss upcasts the logits
        return linear(x, w, None, replace(prec, bf16=prec.low, fp8=None))

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def token_logprobs(logits, targets):
    """log p(target) per position, FP32 (cross-entropy upcasts logits, as Megatron's does)."""
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
