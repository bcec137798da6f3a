# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The layers of the causal DiT (:mod:`.dit`): time embeddings, AdaLN modulation, attention, blocks.

A :class:`DiTBlock` is self-attention with QK RMSNorm and rotary embeddings (through a
:class:`~.attention.LayerAttention`, normally a layer of the K/V cache), I2V cross-attention
over projected CLIP and text tokens, and a GELU FFN, each token modulated (AdaLN, six vectors
per block) by the embedding of its own timestep (:class:`Modulation`).  A tensor-parallel shard
sums the outputs of its row-parallel linears over its group (:attr:`DiTBlock.tp_group`,
:func:`.collectives.all_reduce_sum`, identity for a whole model).  Module attribute names are
upstream's ``state_dict`` keys.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import math

import torch
from torch import nn
import torch.nn.functional as F  # noqa: N812

from dreamzero_ros.engine.networks.attention import LayerAttention, attention
from dreamzero_ros.engine.networks.collectives import all_reduce_sum
from dreamzero_ros.engine.networks.dit_config import DiTConfig
from dreamzero_ros.engine.networks.rope import Rotary, apply_rotary

__all__ = [
    'ActionEncoder',
    'CategorySpecificMLP',
    'CrossKV',
    'DiTBlock',
    'Head',
    'I2VCrossAttention',
    'ImageProjection',
    'Modulation',
    'RMSNorm',
    'SelfAttention',
    'action_time_encoding',
    'sinusoidal_embedding',
]

#: Keys and values of a block's cross-attention: ``(k_text, v_text, k_image, v_image)``.
CrossKV = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def sinusoidal_embedding(dim: int, position: torch.Tensor) -> torch.Tensor:
    """Wan time features ``[cos(p w), sin(p w)]``, ``w = 10000^(-i / (dim/2))``, float64."""
    half = dim // 2
    position = position.to(torch.float64)
    freqs = torch.pow(
        10000.0, -torch.arange(half, dtype=torch.float64, device=position.device).div(half)
    )
    angles = torch.outer(position, freqs)
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=1)


def action_time_encoding(dim: int, timesteps: torch.Tensor) -> torch.Tensor:
    """Sinusoidal encoding of the action encoder ``[sin, cos]`` (log-spaced), float32.

    ``timesteps (B, T)`` -> ``(B, T, dim)``.
    """
    half = dim // 2
    exponent = -torch.arange(half, dtype=torch.float32, device=timesteps.device) * (
        math.log(10000.0) / half
    )
    freqs = timesteps.float().unsqueeze(-1) * exponent.exp()
    return torch.cat([torch.sin(freqs), torch.cos(freqs)], dim=-1)


def _segmentwise(
    fn: Callable[..., torch.Tensor],
    frames: int,
    tokens: tuple[torch.Tensor, ...],
    params: tuple[torch.Tensor, ...],
) -> torch.Tensor:
    """Apply ``fn(*tokens, *params)`` with per-segment ``params`` broadcast to the tokens.

    Tokens ``(B, L, C)`` are ``frames`` equal frames of video tokens then ``R`` register tokens;
    params ``(B, frames + R, C)`` hold one vector per frame and per register token.
    """
    length = tokens[0].shape[1]
    registers = params[0].shape[1] - frames
    video_len = length - registers
    video = fn(
        *(t[:, :video_len].unflatten(1, (frames, video_len // frames)) for t in tokens),
        *(p[:, :frames, None] for p in params),
    ).flatten(1, 2)
    if registers == 0:
        return video
    rest = fn(*(t[:, video_len:] for t in tokens), *(p[:, frames:] for p in params))
    return torch.cat([video, rest], dim=1)


@dataclass(frozen=True)
class Modulation:
    """The AdaLN input of one DiT call's tokens.

    Tokens are ``frames`` equal frames of video tokens, then the register tokens (action and
    state).  ``e0 (B, frames + R, 6, C)`` holds the time projection of each frame, then of each
    register token.  ``uniform`` records that the caller gave one timestep for every frame and
    one for every register token (``(B, 1)`` timesteps, as the denoiser does), so ``e0[:, 0]``
    and ``e0[:, frames]`` stand for all video and all register tokens.
    """

    e0: torch.Tensor
    frames: int
    uniform: bool

    def per_token(self, vectors: torch.Tensor, tokens: int) -> torch.Tensor:
        """Each token's vector of ``vectors (B, frames + R, C)`` (one per frame and register).

        Returns ``(B, tokens, C)``, or ``(B, 1, C)`` where every token shares one vector: in a
        uniform call one vector is broadcast over the video tokens (selected by token position
        where register tokens follow), otherwise each token's is gathered by its segment.
        """
        frames = self.frames
        registers = vectors.shape[1] - frames
        video = tokens - registers
        if self.uniform:
            if not registers:
                return vectors[:, :1]
            register = torch.arange(tokens, device=vectors.device)[:, None] >= video
            return torch.where(register, vectors[:, frames : frames + 1], vectors[:, :1])
        segment = torch.cat(
            [
                torch.arange(video, device=vectors.device) // (video // frames),
                frames + torch.arange(registers, device=vectors.device),
            ]
        )
        return vectors[:, segment]


def _modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * (1 + scale) + shift


class RMSNorm(nn.Module):
    """Wan RMSNorm: normalise in float32, cast back, scale by ``weight``."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` normalised over its last dimension."""
        xf = x.float()
        normed = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


class CategorySpecificLinear(nn.Module):
    """Per-embodiment linear layer ``x @ W[c] + b[c]`` (DreamZero uses one embodiment, c = 0)."""

    def __init__(self, num_categories: int, input_dim: int, output_dim: int) -> None:
        super().__init__()
        self.W = nn.Parameter(torch.empty(num_categories, input_dim, output_dim))
        self.b = nn.Parameter(torch.empty(num_categories, output_dim))
        nn.init.normal_(self.W, std=0.02)
        nn.init.zeros_(self.b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(x, self.W[0]) + self.b[0]


class CategorySpecificMLP(nn.Module):
    """Two category-specific linears with a ReLU: the state encoder and the action decoder."""

    def __init__(self, num_categories: int, input_dim: int, hidden_dim: int, output_dim: int):
        super().__init__()
        self.layer1 = CategorySpecificLinear(num_categories, input_dim, hidden_dim)
        self.layer2 = CategorySpecificLinear(num_categories, hidden_dim, output_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Two category-specific linears with a ReLU between them."""
        return self.layer2(F.relu(self.layer1(x)))


class ActionEncoder(nn.Module):
    """Noisy actions + action timestep -> tokens: ``W3(swish(W2([W1 a, sincos(t)])))``."""

    def __init__(self, action_dim: int, hidden_size: int, num_categories: int = 1) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.W1 = CategorySpecificLinear(num_categories, action_dim, hidden_size)
        self.W2 = CategorySpecificLinear(num_categories, 2 * hidden_size, hidden_size)
        self.W3 = CategorySpecificLinear(num_categories, hidden_size, hidden_size)

    def forward(self, actions: torch.Tensor, timesteps: torch.Tensor) -> torch.Tensor:
        """Tokens of noisy ``actions (B, A, action_dim)`` at their ``timesteps``."""
        a_emb = self.W1(actions)
        tau = action_time_encoding(self.hidden_size, timesteps).to(a_emb.dtype)
        return self.W3(F.silu(self.W2(torch.cat([a_emb, tau], dim=-1))))


class _Projections(nn.Module):
    """The layers every attention of a block has: ``q, k, v, o`` and the QK RMSNorms."""

    def __init__(self, dim: int, num_heads: int, qk_norm: bool, eps: float) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.norm_q = RMSNorm(dim, eps) if qk_norm else nn.Identity()
        self.norm_k = RMSNorm(dim, eps) if qk_norm else nn.Identity()


class SelfAttention(_Projections):
    """Causal self-attention: projections with QK RMSNorm; attention in the layer's backend."""

    def normalize_and_rotate(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rotary: Rotary
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """QK RMSNorm and rotary embedding of ``q, k, v (B, L, dim)``: ``(B, L, heads, D)`` each."""
        heads = self.num_heads
        q = apply_rotary(self.norm_q(q).unflatten(-1, (heads, -1)), rotary)
        k = apply_rotary(self.norm_k(k).unflatten(-1, (heads, -1)), rotary)
        return q, k, v.unflatten(-1, (heads, -1))

    def write_keys_values(
        self, x: torch.Tensor, rotary: Rotary, kv: LayerAttention
    ) -> torch.Tensor:
        """Write the rotated keys and the values of ``x`` into ``kv``; return the queries."""
        q, k, v = self.normalize_and_rotate(self.q(x), self.k(x), self.v(x), rotary)
        kv.write(k, v)
        return q

    def forward(self, x: torch.Tensor, rotary: Rotary, kv: LayerAttention) -> torch.Tensor:
        """The attention output of ``x (B, L, C)``, before any tensor-parallel sum."""
        q = self.write_keys_values(x, rotary, kv)
        return self.o(kv.attend_written(q).flatten(2))


class I2VCrossAttention(_Projections):
    """Wan I2V cross-attention: text and CLIP-image attention share the query, outputs summed."""

    def __init__(self, dim: int, num_heads: int, qk_norm: bool, eps: float) -> None:
        super().__init__(dim, num_heads, qk_norm, eps)
        self.k_img = nn.Linear(dim, dim)
        self.v_img = nn.Linear(dim, dim)
        self.norm_k_img = RMSNorm(dim, eps) if qk_norm else nn.Identity()

    def project_context(
        self, text: torch.Tensor, image: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Keys and values of the embedded text ``(B, Lt, C)`` and image ``(B, Li, C)`` tokens."""
        h = self.num_heads
        return (
            self.norm_k(self.k(text)).unflatten(-1, (h, -1)),
            self.v(text).unflatten(-1, (h, -1)),
            self.norm_k_img(self.k_img(image)).unflatten(-1, (h, -1)),
            self.v_img(image).unflatten(-1, (h, -1)),
        )

    def forward(self, x: torch.Tensor, kv: CrossKV) -> torch.Tensor:
        """The attention output of ``x (B, L, C)``, before any tensor-parallel sum."""
        k_text, v_text, k_img, v_img = kv
        q = self.norm_q(self.q(x)).unflatten(-1, (self.num_heads, -1))
        return self.o(
            attention(q, k_text, v_text).flatten(2) + attention(q, k_img, v_img).flatten(2)
        )


class DiTBlock(nn.Module):
    """Self-attention, cross-attention and FFN with per-token AdaLN modulation.

    ``tp_group``: the process group of a tensor-parallel shard (:mod:`.tensor_parallel`), over
    which the outputs of the row-parallel linears (``self_attn.o``, ``cross_attn.o``,
    ``ffn.2``) are summed; None for a whole model.
    """

    def __init__(self, config: DiTConfig) -> None:
        super().__init__()
        dim, eps = config.dim, config.eps
        self.norm1 = nn.LayerNorm(dim, eps=eps, elementwise_affine=False)
        self.self_attn = SelfAttention(dim, config.num_heads, config.qk_norm, eps)
        self.norm3 = (
            nn.LayerNorm(dim, eps=eps, elementwise_affine=True)
            if config.cross_attn_norm
            else nn.Identity()
        )
        self.cross_attn = I2VCrossAttention(dim, config.num_heads, config.qk_norm, eps)
        self.norm2 = nn.LayerNorm(dim, eps=eps, elementwise_affine=False)
        self.ffn = nn.Sequential(
            nn.Linear(dim, config.ffn_dim),
            nn.GELU(approximate='tanh'),
            nn.Linear(config.ffn_dim, dim),
        )
        self.modulation = nn.Parameter(torch.empty(1, 6, dim))
        nn.init.normal_(self.modulation, std=dim**-0.5)
        self.tp_group: str | None = None

    def forward(
        self,
        x: torch.Tensor,
        modulation: Modulation,
        rotary: Rotary,
        cross_kv: CrossKV,
        kv: LayerAttention,
    ) -> torch.Tensor:
        """``x (B, L, C)`` through the block, each token modulated by its own vectors."""
        tokens = x.shape[1]
        mod = (self.modulation.unsqueeze(0) + modulation.e0).unbind(2)
        shift1, scale1, gate1, shift2, scale2, gate2 = (
            modulation.per_token(m, tokens) for m in mod
        )
        y = self.self_attn(_modulate(self.norm1(x), shift1, scale1), rotary, kv)
        x = x + all_reduce_sum(y, self.tp_group) * gate1
        x = x + all_reduce_sum(self.cross_attn(self.norm3(x), cross_kv), self.tp_group)
        y = self.ffn(_modulate(self.norm2(x), shift2, scale2))
        return x + all_reduce_sum(y, self.tp_group) * gate2

    def write_keys_values(
        self, x: torch.Tensor, modulation: Modulation, rotary: Rotary, kv: LayerAttention
    ) -> None:
        """Only the self-attention keys and values of ``x``, written into ``kv`` (a prefill)."""
        mod = (self.modulation[:, :2].unsqueeze(0) + modulation.e0[:, :, :2]).unbind(2)
        shift1, scale1 = (modulation.per_token(m, x.shape[1]) for m in mod)
        self.self_attn.write_keys_values(_modulate(self.norm1(x), shift1, scale1), rotary, kv)


class Head(nn.Module):
    """Output head: AdaLN (two modulation vectors) then a linear to patch pixels."""

    def __init__(self, dim: int, out_dim: int, patch_size: tuple[int, int, int], eps: float):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=eps, elementwise_affine=False)
        self.head = nn.Linear(dim, math.prod(patch_size) * out_dim)
        self.modulation = nn.Parameter(torch.empty(1, 2, dim))
        nn.init.normal_(self.modulation, std=dim**-0.5)

    def forward(self, x: torch.Tensor, e: torch.Tensor, frames: int) -> torch.Tensor:
        """``x (B, L, C)`` video tokens, ``e (B, frames, C)`` time embeddings per frame."""
        shift, scale = (self.modulation.unsqueeze(0) + e.unsqueeze(2)).unbind(2)
        return self.head(_segmentwise(_modulate, frames, (self.norm(x),), (shift, scale)))


class ImageProjection(nn.Module):
    """CLIP token projection (upstream ``MLPProj``): LN, Linear, GELU, Linear, LN."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.proj = nn.Sequential(
            nn.LayerNorm(in_dim),
            nn.Linear(in_dim, in_dim),
            nn.GELU(),
            nn.Linear(in_dim, out_dim),
            nn.LayerNorm(out_dim),
        )

    def forward(self, image_embeds: torch.Tensor) -> torch.Tensor:
        """CLIP tokens projected to the DiT's width."""
        return self.proj(image_embeds)
