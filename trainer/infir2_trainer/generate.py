"""Batched sampling with a KV cache (the rollout engine for RL and the server for eval).

Prompts are left-padded so every sequence's next token sits in the same column; padding is masked out of the
attention and position ids count real tokens only, so a left-padded prompt computes exactly what it would alone.
Sampling draws from an explicit torch.Generator: the same seed gives the same samples, which is what makes RL
resume and eval reports reproducible.
"""
import torch


def sample_next(logits, temperature, top_p, gen):
    """Temperature then nucleus (top-p) sampling on FP32 logits [B, V]; temperature 0 = greedy."""
    if temperature <= 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sp, si = probs.sort(dim=-1, descending=True)
        keep = sp.cumsum(-1) - sp < top_p  # tokens whose preceding mass is below top_p (always the top one)
        sp = sp * keep
        choice = torch.multinomial(sp / sp.sum(-1, keepdim=True), 1, generator=gen)
        return si.gather(-1, choice).squeeze(-1)
    return torch.multinomial(probs, 1, generator=gen).squeeze(-1)


@torch.no_grad()
def generate(model, prompts, max_new_tokens, eos_id, pad_id, temperature=1.0, top_p=1.0, gen=None,
             batch_size=512):
    """prompts: list of token-id lists. Returns (responses, finished): token lists that include the eos token when
    one was produced, and whether it was (False = cut at max_new_tokens, slime's TRUNCATED)."""
    out_r, out_f = [], []
    for s in range(0, len(prompts), batch_size):
        r, f = _generate_batch(model, prompts[s:s + batch_size], max_new_tokens, eos_id, pad_id, temperature,
                               top_p, gen)
        out_r += r
        out_f += f
    return out_r, out_f


def _generate_batch(model, prompts, max_new_tokens, eos_id, pad_id, temperature, top_p, gen):
    device = next(model.parameters()).device
    B, P = len(prompts), max(len(p) for p in prompts)
    ids = torch.full((B, P), pad_id, dtype=torch.long)
    key_mask = torch.zeros((B, P), dtype=torch.bool)
    for i, p in enumerate(prompts):
        ids[i, P - len(p):] = torch.tensor(p)
        key_mask[i, P - len(p):] = True
    ids, key_mask = ids.to(device), key_mask.to(device)
    pos = (key_mask.long().cumsum(-1) - 1).clamp(min=0)
    caches = [dict() for _ in model.decoder.layers]
    logits = model(ids, position_ids=pos, key_mask=key_mask, caches=caches)[:, -1]
    next_pos = pos[:, -1] + 1
    done = torch.zeros(B, dtype=torch.bool, device=device)
    tokens = []
    for _ in range(max_new_tokens):
        tok = sample_next(logits.cpu(), temperature, top_p, gen).to(device)  # sample on CPU: one generator anywhere
        tok = torch.where(done, torch.full_like(tok, pad_id), tok)
        tokens.append(tok)
        done = done | (tok == eos_id)
        if bool(done.all()):
            break
        key_mask = torch.cat([key_mask, torch.ones((B, 1), dtype=torch.bool, device=device)], dim=1)
        logits = model(tok.view(B, 1), position_ids=next_pos.view(B, 1), key_mask=key_mask, caches=caches)[:, -1]
        next_pos = next_pos + 1
    gen_ids = torch.stack(tokens, dim=1).tolist() if tokens else [[] for _ in range(B)]
    responses, finished = [], []
    for row in gen_ids:
        if eos_id in row:
            row = row[:row.index(eos_id) + 1]
            finished.append(True)
        else:
            finished.append(False)
        responses.append(row)
    return responses, finished
