# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The umT5-XXL text encoder of Wan 2.1, as DreamZero runs it.

An encoder-only T5 (v1.1 style): RMS "T5 LayerNorm" without mean subtraction, unscaled attention
with a learned relative-position bias in every layer (not shared), a gated-GELU feed-forward, no
biases. The state_dict keys are upstream's ``WanTextEncoder`` keys (``token_embedding.weight``,
``blocks.{i}.{norm1,attn.{q,k,v,o},norm2,ffn.{gate.0,fc1,fc2},pos_embedding.embedding}.weight``,
``norm.weight``), so the checkpoint's ``action_head.text_encoder.*`` tensors load unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
import math

import torch
from torch import nn
import torch.nn.functional as F  # noqa: N812


@dataclass(frozen=True)
class T5Config:
    """Shape of the umT5 encoder.

    Attributes:
        vocab_size: rows of the token embedding.
        dim: model width (the width of the output embeddings).
        dim_attn: total width of the attention projections.
        dim_ffn: hidden width of the gated feed-forward.
        num_heads: attention heads.
        num_layers: encoder blocks.
        num_buckets: relative-position buckets (bidirectional: half per direction).
        max_distance: relative distance at which the logarithmic buckets saturate.
        shared_pos: one relative-position embedding for all blocks instead of one per block.
        text_len: prompt length in tokens (the tokenizer pads and truncates to it).
        eps: epsilon of the RMS norms.

    """

    vocab_size: int = 256384
    dim: int = 4096
    dim_attn: int = 4096
    dim_ffn: int = 10240
    num_heads: int = 64
    num_layers: int = 24
    num_buckets: int = 32
    max_distance: int = 128
    shared_pos: bool = False
    text_len: int = 512
    eps: float = 1e-6

    @classmethod
    def umt5_xxl(cls) -> T5Config:
        """The encoder of umT5-XXL used by Wan 2.1 and DreamZero (5.7 B parameters)."""
        return cls()

    @classmethod
    def tiny(cls) -> T5Config:
        """A small encoder of the same structure for CPU tests and the demo."""
        return cls(vocab_size=512, dim=32, dim_attn=32, dim_ffn=64, num_heads=4, num_layers=2)

    def __post_init__(self) -> None:
        if self.dim_attn % self.num_heads:
            raise ValueError(f'dim_attn {self.dim_attn} not divisible by {self.num_heads} heads')
        if self.num_buckets < 4 or self.num_buckets % 2:
            raise ValueError(f'num_buckets must be even and >= 4, got {self.num_buckets}')


class T5LayerNorm(nn.Module):
    """Scale-only RMS norm, computed in float32 like upstream."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise over the last dimension."""
        x = x * torch.rsqrt(x.float().pow(2).mean(dim=-1, keepdim=True) + self.eps)
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            x = x.type_as(self.weight)
        return self.weight * x


class T5Attention(nn.Module):
    """Multi-head self-attention without the 1/sqrt(d) scaling, with an additive bias."""

    def __init__(self, dim: int, dim_attn: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.q = nn.Linear(dim, dim_attn, bias=False)
        self.k = nn.Linear(dim, dim_attn, bias=False)
        self.v = nn.Linear(dim, dim_attn, bias=False)
        self.o = nn.Linear(dim_attn, dim, bias=False)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """Attend ``x (B, L, C)`` with ``bias`` broadcastable to ``(B, heads, L, L)``."""
        b, length, _ = x.shape
        q, k, v = (
            proj(x).view(b, length, self.num_heads, -1).transpose(1, 2)
            for proj in (self.q, self.k, self.v)
        )
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=1.0)
        return self.o(out.transpose(1, 2).reshape(b, length, -1))


class T5FeedForward(nn.Module):
    """Gated-GELU feed-forward: ``fc2(fc1(x) * gelu_tanh(gate(x)))``."""

    def __init__(self, dim: int, dim_ffn: int) -> None:
        super().__init__()
        self.gate = nn.Sequential(nn.Linear(dim, dim_ffn, bias=False), nn.GELU('tanh'))
        self.fc1 = nn.Linear(dim, dim_ffn, bias=False)
        self.fc2 = nn.Linear(dim_ffn, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the feed-forward to ``x (..., dim)``."""
        return self.fc2(self.fc1(x) * self.gate(x))


class T5RelativeEmbedding(nn.Module):
    """Learned per-head bias indexed by bucketed relative position."""

    def __init__(self, num_buckets: int, num_heads: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(num_buckets, num_heads)

    def forward(self, buckets: torch.Tensor) -> torch.Tensor:
        """Bias ``(1, heads, Lq, Lk)`` for bucket indices ``(Lq, Lk)``."""
        return self.embedding(buckets).permute(2, 0, 1).unsqueeze(0)


def relative_position_buckets(
    length: int, num_buckets: int, max_distance: int, device: torch.device | None = None
) -> torch.Tensor:
    """Bidirectional T5 buckets ``(L, L)`` of ``key - query`` positions.

    Half the buckets per direction; within one direction the first half are exact distances and
    the rest grow logarithmically up to ``max_distance``.
    """
    positions = torch.arange(length, device=device)
    relative = positions.unsqueeze(0) - positions.unsqueeze(1)
    half = num_buckets // 2
    max_exact = half // 2
    buckets = (relative > 0).long() * half
    distance = relative.abs()
    log_ratio = torch.log(distance.float() / max_exact) / math.log(max_distance / max_exact)
    large = max_exact + (log_ratio * (half - max_exact)).long()
    large = large.clamp(max=half - 1)
    return buckets + torch.where(distance < max_exact, distance, large)


def _clamp_fp16(x: torch.Tensor) -> torch.Tensor:
    if x.dtype == torch.float16 and torch.isinf(x).any():
        limit = torch.finfo(x.dtype).max - 1000
        x = x.clamp(-limit, limit)
    return x


class T5Block(nn.Module):
    """Pre-norm self-attention and feed-forward, each with a residual."""

    def __init__(self, config: T5Config) -> None:
        super().__init__()
        self.norm1 = T5LayerNorm(config.dim, config.eps)
        self.attn = T5Attention(config.dim, config.dim_attn, config.num_heads)
        self.norm2 = T5LayerNorm(config.dim, config.eps)
        self.ffn = T5FeedForward(config.dim, config.dim_ffn)
        self.pos_embedding = (
            None if config.shared_pos else T5RelativeEmbedding(config.num_buckets, config.num_heads)
        )

    def forward(
        self,
        x: torch.Tensor,
        key_mask: torch.Tensor,
        buckets: torch.Tensor,
        shared_bias: torch.Tensor | None,
    ) -> torch.Tensor:
        """Run the block; ``key_mask (B, 1, 1, L)`` is True where keys are padding."""
        bias = shared_bias if self.pos_embedding is None else self.pos_embedding(buckets)
        bias = bias.to(x.dtype).masked_fill(key_mask, torch.finfo(x.dtype).min)
        x = _clamp_fp16(x + self.attn(self.norm1(x), bias))
        return _clamp_fp16(x + self.ffn(self.norm2(x)))


class UMT5Encoder(nn.Module):
    """The umT5 encoder: token ids to contextual embeddings.

    ``forward`` is upstream's ``WanTextEncoder.forward``; :meth:`encode` adds what DreamZero's
    ``encode_prompt`` does after it (padded positions set to zero) and skips the work on padding.
    """

    def __init__(self, config: T5Config) -> None:
        super().__init__()
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.dim)
        self.pos_embedding = (
            T5RelativeEmbedding(config.num_buckets, config.num_heads) if config.shared_pos else None
        )
        self.blocks = nn.ModuleList(T5Block(config) for _ in range(config.num_layers))
        self.norm = T5LayerNorm(config.dim, config.eps)
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, T5FeedForward):
            nn.init.normal_(module.gate[0].weight, std=module.fc1.in_features**-0.5)
            nn.init.normal_(module.fc1.weight, std=module.fc1.in_features**-0.5)
            nn.init.normal_(module.fc2.weight, std=module.fc2.in_features**-0.5)
        elif isinstance(module, T5Attention):
            dim, dim_attn = module.q.in_features, module.q.out_features
            nn.init.normal_(module.q.weight, std=(dim * dim_attn) ** -0.5)
            nn.init.normal_(module.k.weight, std=dim**-0.5)
            nn.init.normal_(module.v.weight, std=dim**-0.5)
            nn.init.normal_(module.o.weight, std=(module.num_heads * dim_attn) ** -0.5)
        elif isinstance(module, T5RelativeEmbedding):
            buckets, heads = module.embedding.weight.shape
            nn.init.normal_(module.embedding.weight, std=(2 * buckets * heads) ** -0.5)

    def _check_inputs(self, ids: torch.Tensor, mask: torch.Tensor) -> None:
        if ids.ndim != 2 or ids.dtype not in (torch.int32, torch.int64):
            raise ValueError(
                f'ids must be an integer tensor (B, L), got {ids.dtype} {tuple(ids.shape)}'
            )
        if mask.shape != ids.shape:
            raise ValueError(
                f'mask shape {tuple(mask.shape)} differs from ids shape {tuple(ids.shape)}'
            )
        if mask.is_floating_point() or mask.is_complex():
            raise ValueError(f'mask must be an integer or bool tensor, got {mask.dtype}')
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.config.vocab_size):
            raise ValueError(
                f'token ids must be in [0, {self.config.vocab_size}), got '
                f"[{int(ids.min())}, {int(ids.max())}]: is the tokenizer the model's?"
            )

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Encode ``ids (B, L)`` with attention ``mask (B, L)`` (nonzero on real tokens).

        Returns:
            ``(B, L, dim)`` in the dtype of the weights. Padding keys are masked out of the
            attention, but padded positions still carry values (as upstream).

        """
        self._check_inputs(ids, mask)
        x = self.token_embedding(ids)
        length = ids.shape[1]
        buckets = relative_position_buckets(
            length, self.config.num_buckets, self.config.max_distance, device=ids.device
        )
        shared_bias = None if self.pos_embedding is None else self.pos_embedding(buckets)
        key_mask = (mask == 0).view(ids.shape[0], 1, 1, length)
        for block in self.blocks:
            x = block(x, key_mask, buckets, shared_bias)
        return self.norm(x)

    @torch.no_grad()
    def encode(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Prompt embeddings as DreamZero feeds them to the DiT.

        Equal to ``forward`` with every position at or beyond a row's token count set to zero
        (upstream ``encode_prompt``). Only the first ``max(token count)`` positions are computed:
        real tokens never attend to padding, so the result is the same.

        Returns:
            ``(B, L, dim)`` in the dtype of the weights; cache it per prompt.

        """
        self._check_inputs(ids, mask)
        lengths = (mask > 0).sum(dim=1)
        used = max(int(lengths.max()), 1)
        out = self.forward(ids[:, :used], mask[:, :used])
        keep = torch.arange(used, device=ids.device).unsqueeze(0) < lengths.unsqueeze(1)
        out = out.masked_fill(~keep.unsqueeze(-1), 0.0)
        return F.pad(out, (0, 0, 0, ids.shape[1] - used))
