"""Rotary position embedding as transformers applies it: rotate-half pairing (LLaMA's
apply_rotary_pos_emb), or interleaved pairs (x0, x1), (x2, x3), ... (DeepSeek's
apply_rotary_pos_emb_interleave, whose output lays the pairs' first and second members out
as two halves)."""

import torch

from archipelago.strategies.tensor_parallel.emulate.state import RankState


def rotary(x: torch.Tensor, rs: RankState) -> torch.Tensor:
    """`x` (..., tokens, head_dim) rotated by the pass's positions (rs.positions)."""
    assert rs.numerics.rope_theta is not None
    head_dim = x.shape[-1]
    inv_freq = 1.0 / rs.numerics.rope_theta ** (
        torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = rs.positions[:, None].float() * inv_freq[None, :]
    if rs.numerics.rope_interleaved:
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        first, second = x[..., 0::2], x[..., 1::2]
        return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)
    angles = torch.cat((angles, angles), dim=-1)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    half = head_dim // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin
