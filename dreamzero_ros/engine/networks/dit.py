# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""DreamZero's causal Wan2.1-I2V video DiT with action and state tokens.

This is the network of upstream ``CausalWanModel`` (``wan_video_dit_action_casual_chunk.py``), for
inference with a K/V cache.  Module attribute names reproduce upstream's ``state_dict`` keys, so the
released checkpoint's ``action_head.model.<key>`` tensors load unchanged once the prefix is
stripped (``test/test_engine_dit_keys.py`` lists every key and shape of the 14B model).

One DiT call processes the tokens ``[video | action | state]``:

* video: ``cat([latents (16 ch), y (4 mask + 16 first-frame ch)])`` -> ``Conv3d`` patches of
  (1, 2, 2) -> ``frames * (H/2) * (W/2)`` tokens (frame-major), 3-D rotary positions from
  ``start_frame``;
* action (denoising calls only): ``action_encoder(noisy actions, action timestep)``, 1-D rotary;
* state (denoising calls only): ``state_encoder(state)``, 1-D rotary, modulated with the action
  timestep (upstream takes every ``A / S``-th action timestep for the state tokens).

Each token is modulated (AdaLN, six vectors per block) by the embedding of its own timestep:
per frame for video (0 for clean prefill frames), per action token for actions.  Timestep
embeddings are computed once per frame / register token and broadcast to the frame's tokens.
Blocks: self-attention with QK RMSNorm and rotary embeddings (through a
:class:`~.attention.SelfAttentionBackend`, normally the K/V cache), I2V
cross-attention over projected CLIP tokens (257 x 1280) and text tokens (512 x 4096), GELU FFN.
The video head (AdaLN + linear) and unpatchify give the video velocity ``(B, 16, F, H, W)``; the
action decoder maps the action tokens' outputs to the action velocity ``(B, A, action_dim)``.

Cross-attention keys and values depend only on the prompt and the CLIP tokens, so they are
projected once per context window by :meth:`CausalWanDiT.prepare_context` (upstream recomputes
them every call; the result is the same).  A prefill needs only the keys and values of its clean
frames, so its last block stops once they are cached.

This is the reference model, and the one that runs: speed is applied from outside, as diffusers
does for Wan (:mod:`.acceleration`): module transforms that compute the same function (one q/k/v
product, FP8 linears, the FFN's GELU in its product's epilogue) and ``torch.compile`` of each
:class:`DiTBlock` as written.  Attention runs in the ops of :mod:`.attention`
(``dreamzero::kv_cache_attention`` over the K/V cache, ``dreamzero::attention`` for the
cross-attention), which own the attention kernel.  A tensor-parallel shard
(:mod:`.tensor_parallel`) sums the outputs of its row-parallel linears over its group
(:func:`.collectives.all_reduce_sum`, identity for a whole model).

Numerics follow upstream: RMSNorm in float32, sinusoidal time features in float64 cast to the
model dtype, rotary embeddings in float32 (upstream: float64) cast back to the model dtype.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import math
from typing import Any

import torch
from torch import nn
import torch.nn.functional as F  # noqa: N812

from dreamzero_ros.engine.networks.attention import LayerAttention, SelfAttentionBackend, attention
from dreamzero_ros.engine.networks.collectives import all_reduce_sum
from dreamzero_ros.engine.networks.kv_cache import KV_CACHES, KVCache
from dreamzero_ros.engine.networks.rope import RopeTables, Rotary, apply_rotary, video_axis_pairs

__all__ = [
    'CausalWanDiT',
    'CrossAttentionContext',
    'DiTBlock',
    'DiTConfig',
    'DiTOutput',
    'Modulation',
]

#: Keys and values of a block's cross-attention: ``(k_text, v_text, k_image, v_image)``.
CrossKV = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class DiTConfig:
    """Architecture of the causal DiT; field names follow upstream's ``CausalWanModel`` kwargs.

    ``max_chunk_size`` chunks of ``num_frame_per_block`` latent frames plus the first frame form a
    context window of ``local_attn_size`` frames.  ``clip_dim`` is fixed to 1280 upstream (the
    width of CLIP ViT-H/14 tokens); it is a field so that small test configs can shrink it.
    """

    dim: int = 5120
    ffn_dim: int = 13824
    num_heads: int = 40
    num_layers: int = 40
    in_dim: int = 36
    out_dim: int = 16
    freq_dim: int = 256
    text_dim: int = 4096
    text_len: int = 512
    clip_dim: int = 1280
    patch_size: tuple[int, int, int] = (1, 2, 2)
    eps: float = 1e-6
    qk_norm: bool = True
    cross_attn_norm: bool = True
    model_type: str = 'i2v'
    frame_seqlen: int = 880
    num_frame_per_block: int = 2
    num_action_per_block: int = 24
    num_state_per_block: int = 1
    max_chunk_size: int = 4
    action_dim: int = 32
    max_state_dim: int = 64
    hidden_size: int = 1024

    def __post_init__(self) -> None:
        if self.model_type != 'i2v':
            raise ValueError(f"only the 'i2v' DiT is supported, got model_type={self.model_type!r}")
        if self.dim % self.num_heads:
            raise ValueError(f'dim {self.dim} is not a multiple of num_heads {self.num_heads}')
        video_axis_pairs(self.head_dim)  # validates an even head_dim
        if self.num_action_per_block % self.num_state_per_block:
            raise ValueError('num_action_per_block must be a multiple of num_state_per_block')
        for name in ('num_frame_per_block', 'num_action_per_block', 'num_state_per_block'):
            if getattr(self, name) < 1:
                raise ValueError(f'{name} must be >= 1')

    @property
    def head_dim(self) -> int:
        """Channels per attention head."""
        return self.dim // self.num_heads

    @property
    def local_attn_size(self) -> int:
        """Frames of a context window; -1 (no window) when ``max_chunk_size`` is -1."""
        if self.max_chunk_size == -1:
            return -1
        return self.max_chunk_size * self.num_frame_per_block + 1

    @property
    def max_attention_tokens(self) -> int:
        """Sliding window of cached plus new video tokens (upstream ``max_attention_size``)."""
        frames = 21 if self.local_attn_size == -1 else self.local_attn_size
        return frames * self.frame_seqlen

    @property
    def register_tokens(self) -> int:
        """Action plus state tokens of one denoising call."""
        return self.num_action_per_block + self.num_state_per_block

    @classmethod
    def full_14b(cls) -> DiTConfig:
        """The published DreamZero-DROID DiT (Wan2.1-I2V-14B shape, 880 tokens per frame)."""
        return cls()

    @classmethod
    def tiny(cls) -> DiTConfig:
        """A small DiT of the same structure and DROID token layout, for CPU tests and demos."""
        return cls(
            dim=64,
            ffn_dim=128,
            num_heads=2,
            num_layers=2,
            freq_dim=32,
            text_dim=64,
            clip_dim=32,
            hidden_size=32,
        )


@dataclass(frozen=True)
class DiTOutput:
    """Velocities predicted by one denoising call."""

    video: torch.Tensor  # (B, out_dim, F, H, W)
    action: torch.Tensor  # (B, num_action, action_dim)


@dataclass(frozen=True)
class CrossAttentionContext:
    """Projected cross-attention keys/values of every block, ``(B, L, heads, head_dim)`` each.

    ``layers[i] = (k_text, v_text, k_image, v_image)``.
    """

    layers: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]

    def rows(self, count: int) -> CrossAttentionContext:
        """The first ``count`` rows of the batch (views)."""
        return CrossAttentionContext([tuple(t[:count] for t in ls) for ls in self.layers])

    @staticmethod
    def cat(parts: list[CrossAttentionContext]) -> CrossAttentionContext:
        """Stack contexts along the batch (e.g. conditional then unconditional)."""
        return CrossAttentionContext(
            [
                tuple(torch.cat(ts, dim=0) for ts in zip(*ls, strict=True))
                for ls in zip(*(p.layers for p in parts), strict=True)
            ]
        )


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
        a_emb = self.W1(actions)
        tau = action_time_encoding(self.hidden_size, timesteps).to(a_emb.dtype)
        return self.W3(F.silu(self.W2(torch.cat([a_emb, tau], dim=-1))))


class SelfAttention(nn.Module):
    """Causal self-attention: projections with QK RMSNorm; attention in the layer's backend."""

    def __init__(self, dim: int, num_heads: int, qk_norm: bool, eps: float) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.norm_q = RMSNorm(dim, eps) if qk_norm else nn.Identity()
        self.norm_k = RMSNorm(dim, eps) if qk_norm else nn.Identity()

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


class I2VCrossAttention(nn.Module):
    """Wan I2V cross-attention: text and CLIP-image attention share the query, outputs summed."""

    def __init__(self, dim: int, num_heads: int, qk_norm: bool, eps: float) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.norm_q = RMSNorm(dim, eps) if qk_norm else nn.Identity()
        self.norm_k = RMSNorm(dim, eps) if qk_norm else nn.Identity()
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
        return self.proj(image_embeds)


class CausalWanDiT(nn.Module):
    """The causal Wan DiT with action/state tokens; see the module docstring.

    Typical use (the denoiser does this)::

        ctx = dit.prepare_context(text_embeds, clip_tokens)       # once per window and prompt
        cache = dit.new_cache(batch)                               # once per session/window
        dit.prefill(clean_latents, y_clean, ctx, cache, start_frame)  # commits clean K/V
        out = dit(noisy_latents, y, t_video, ctx, cache, start_frame,
                  action=noisy_actions, timestep_action=t_action, state=state)

    """

    def __init__(self, config: DiTConfig) -> None:
        super().__init__()
        self.config = config
        dim = config.dim
        self.state_encoder = CategorySpecificMLP(1, config.max_state_dim, config.hidden_size, dim)
        self.action_encoder = ActionEncoder(config.action_dim, dim)
        self.action_decoder = CategorySpecificMLP(1, dim, config.hidden_size, config.action_dim)
        self.patch_embedding = nn.Conv3d(
            config.in_dim, dim, kernel_size=config.patch_size, stride=config.patch_size
        )
        self.text_embedding = nn.Sequential(
            nn.Linear(config.text_dim, dim), nn.GELU(approximate='tanh'), nn.Linear(dim, dim)
        )
        self.time_embedding = nn.Sequential(
            nn.Linear(config.freq_dim, dim), nn.SiLU(), nn.Linear(dim, dim)
        )
        self.time_projection = nn.Sequential(nn.SiLU(), nn.Linear(dim, dim * 6))
        self.blocks = nn.ModuleList([DiTBlock(config) for _ in range(config.num_layers)])
        self.head = Head(dim, config.out_dim, config.patch_size, config.eps)
        self.img_emb = ImageProjection(config.clip_dim, dim)
        self._rope: RopeTables | None = None
        self._rotary: dict[tuple, Rotary] = {}
        #: This rank's :class:`~.tensor_parallel.TensorParallelShard`, set from outside by
        #: :func:`~.tensor_parallel.shard_dit_`; None for the whole model.
        self.tensor_parallel: Any = None

    @property
    def device(self) -> torch.device:
        """Device of the parameters."""
        return self.patch_embedding.weight.device

    @property
    def dtype(self) -> torch.dtype:
        """Compute dtype (the parameters' dtype)."""
        return self.patch_embedding.weight.dtype

    def rope_tables(self) -> RopeTables:
        """Rotary tables on the model's device (built once, rebuilt if the model moves)."""
        if self._rope is None or self._rope.device != self.device:
            self._rope = RopeTables(self.config.head_dim, self.device)
            self._rotary.clear()
        return self._rope

    def rotary(self, start_frame: int, grid: tuple[int, int, int], registers: bool) -> Rotary:
        """Rotation of a call's tokens: video from ``start_frame``, then action/state if asked.

        Memoised (a chunk's 16 steps share one), so a denoising step builds no tables.
        """
        tables = self.rope_tables()
        key = (start_frame, grid, registers)
        rotary = self._rotary.get(key)
        if rotary is None:
            c = self.config
            rotary = tables.video(start_frame, *grid)
            if registers:
                chunk = (start_frame - 1) // c.num_frame_per_block
                rotary = Rotary.cat(
                    [
                        rotary,
                        tables.registers(chunk, c.num_action_per_block, c.num_state_per_block),
                    ]
                )
            if len(self._rotary) >= 64:
                self._rotary.clear()
            self._rotary[key] = rotary
        return rotary

    def new_cache(self, batch: int, kind: str = 'model') -> KVCache:
        """An empty K/V cache for ``batch`` rows on the model's device.

        ``kind``: ``model`` (keys and values in the model dtype) or ``fp8``
        (:class:`~.kv_cache.Fp8KVCache`).
        """
        c = self.config
        return KV_CACHES[kind](
            c.num_layers,
            batch,
            self.blocks[0].self_attn.num_heads,  # heads held here (fewer under tensor parallel)
            c.head_dim,
            c.max_attention_tokens,
            c.register_tokens,
            self.dtype,
            self.device,
        )

    def prepare_context(
        self, text_embeds: torch.Tensor, clip_tokens: torch.Tensor
    ) -> CrossAttentionContext:
        """Project text ``(B, text_len, text_dim)`` and CLIP ``(B, 257, clip_dim)`` for every block.

        Text positions past the prompt length must be zero (upstream zeroes them); they are
        attended like any other position, as upstream does.
        """
        c = self.config
        if text_embeds.ndim != 3 or text_embeds.shape[1:] != (c.text_len, c.text_dim):
            raise ValueError(
                f'text embeddings must be (B, {c.text_len}, {c.text_dim}), '
                f'got {tuple(text_embeds.shape)}'
            )
        if clip_tokens.ndim != 3 or clip_tokens.shape[-1] != c.clip_dim:
            raise ValueError(
                f'CLIP tokens must be (B, N, {c.clip_dim}), got {tuple(clip_tokens.shape)}'
            )
        if clip_tokens.shape[0] != text_embeds.shape[0]:
            raise ValueError('text and CLIP batches differ')
        text = self.text_embedding(text_embeds.to(self.dtype))
        image = self.img_emb(clip_tokens.to(self.dtype))
        return CrossAttentionContext(
            [blk.cross_attn.project_context(text, image) for blk in self.blocks]
        )

    def embed_video(self, latents: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        """Patch tokens ``(B, F*h*w, C)`` of ``cat([latents, y])`` and the grid ``(F, h, w)``."""
        x = self.patch_embedding(torch.cat([latents, y.to(latents.dtype)], dim=1))
        grid = tuple(x.shape[2:])
        return x.flatten(2).transpose(1, 2), grid

    def embed_registers(
        self, action: torch.Tensor, timestep_action: torch.Tensor, state: torch.Tensor
    ) -> torch.Tensor:
        """Action then state tokens ``(B, A + S, C)``."""
        return torch.cat(
            [self.action_encoder(action, timestep_action), self.state_encoder(state)], dim=1
        )

    def time_embeddings(self, timesteps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``timesteps (B, S)`` -> embeddings ``e (B, S, C)``, projections ``e0 (B, S, 6, C)``."""
        b, s = timesteps.shape
        feats = sinusoidal_embedding(self.config.freq_dim, timesteps.flatten()).to(self.dtype)
        e = self.time_embedding(feats).unflatten(0, (b, s))
        e0 = self.time_projection(e).unflatten(2, (6, self.config.dim))
        return e, e0

    def run_blocks(
        self,
        x: torch.Tensor,
        modulation: Modulation,
        rotary: Rotary,
        context: CrossAttentionContext,
        backend: SelfAttentionBackend,
    ) -> torch.Tensor:
        """All blocks on tokens ``x`` laid out as ``modulation.frames`` frames then registers."""
        for i, block in enumerate(self.blocks):
            x = block(x, modulation, rotary, context.layers[i], backend.layer(i))
        return x

    def unpatchify(self, x: torch.Tensor, grid: tuple[int, int, int]) -> torch.Tensor:
        """``(B, F*h*w, prod(patch)*out_dim)`` -> ``(B, out_dim, F*pt, h*ph, w*pw)``."""
        b, (f, h, w), (pt, ph, pw) = x.shape[0], grid, self.config.patch_size
        c = self.config.out_dim
        x = x.view(b, f, h, w, pt, ph, pw, c).permute(0, 7, 1, 4, 2, 5, 3, 6)
        return x.reshape(b, c, f * pt, h * ph, w * pw)

    def _check_video(self, latents: torch.Tensor, y: torch.Tensor) -> None:
        c = self.config
        if latents.ndim != 5 or y.ndim != 5:
            raise ValueError('latents and y must be (B, C, F, H, W)')
        if latents.shape[1] + y.shape[1] != c.in_dim:
            raise ValueError(
                f'latent ({latents.shape[1]}) + conditioning ({y.shape[1]}) channels '
                f'!= in_dim {c.in_dim}'
            )
        if latents.shape[0] != y.shape[0] or latents.shape[2:] != y.shape[2:]:
            raise ValueError(f'latents {tuple(latents.shape)} and y {tuple(y.shape)} disagree')
        pt, ph, pw = c.patch_size
        f, h, w = latents.shape[2:]
        if f % pt or h % ph or w % pw:
            raise ValueError(
                f'latent grid {(f, h, w)} is not divisible by the patch {c.patch_size}'
            )
        if (h // ph) * (w // pw) != c.frame_seqlen:
            raise ValueError(
                f'latent {h}x{w} gives {(h // ph) * (w // pw)} tokens per frame, the model expects '
                f'frame_seqlen={c.frame_seqlen}'
            )

    def prefill(
        self,
        latents: torch.Tensor,
        y: torch.Tensor,
        context: CrossAttentionContext,
        cache: KVCache,
        start_frame: int,
    ) -> None:
        """Run clean context frames at ``t = 0`` and commit their keys/values to ``cache``.

        The last block computes its keys and values only: nothing reads its output.
        """
        self._check_video(latents, y)
        x, grid = self.embed_video(latents.to(self.dtype), y)
        frames = grid[0]
        _, e0 = self.time_embeddings(
            torch.zeros(x.shape[0], frames, dtype=torch.int64, device=x.device)
        )
        modulation = Modulation(e0, frames, uniform=True)
        rotary = self.rotary(start_frame, grid, registers=False)
        cache.begin(x.shape[1], 0)
        *body, last = self.blocks
        for i, block in enumerate(body):
            x = block(x, modulation, rotary, context.layers[i], cache.layer(i))
        last.write_keys_values(x, modulation, rotary, cache.layer(len(body)))
        cache.commit()

    def forward(
        self,
        latents: torch.Tensor,
        y: torch.Tensor,
        timestep: torch.Tensor,
        context: CrossAttentionContext,
        cache: KVCache,
        start_frame: int,
        action: torch.Tensor,
        timestep_action: torch.Tensor,
        state: torch.Tensor,
    ) -> DiTOutput:
        """One denoising call over the cached context; the cache is left unchanged.

        Args:
            latents: noisy video latents ``(B, out_dim, F, H, W)``.
            y: conditioning ``(B, in_dim - out_dim, F, H, W)`` (mask + first-frame latents).
            timestep: model timesteps (0..1000), ``(B, F)`` per frame, or ``(B, 1)``: one for
                every frame of a row.
            context: :meth:`prepare_context` of the batch.
            cache: K/V cache holding the clean frames before ``start_frame``.
            start_frame: absolute frame index of the first noisy frame in the window.
            action: noisy normalised actions ``(B, num_action_per_block, action_dim)``.
            timestep_action: ``(B, num_action_per_block)`` per action, or ``(B, 1)``: one for
                every action.  With ``(B, 1)`` timesteps of both kinds the call is
                :attr:`Modulation.uniform`.
            state: normalised, zero-padded state ``(B, num_state_per_block, max_state_dim)``.

        """
        c = self.config
        self._check_video(latents, y)
        num_action, batch, frames = c.num_action_per_block, latents.shape[0], latents.shape[2]
        if action.shape[1:] != (num_action, c.action_dim) or timestep_action.shape not in (
            (batch, num_action),
            (batch, 1),
        ):
            raise ValueError(
                f'action must be (B, {num_action}, {c.action_dim}) with timesteps '
                f'(B, {num_action}) or (B, 1),'
                f' got {tuple(action.shape)} and {tuple(timestep_action.shape)}'
            )
        if timestep.shape not in ((batch, frames), (batch, 1)):
            raise ValueError(
                f'timestep must be (B, {frames}) or (B, 1), got {tuple(timestep.shape)}'
            )
        if state.shape[1:] != (c.num_state_per_block, c.max_state_dim):
            raise ValueError(
                f'state must be (B, {c.num_state_per_block}, {c.max_state_dim}), '
                f'got {tuple(state.shape)}'
            )
        if start_frame < 1:
            raise ValueError('a denoising call needs the first frame prefilled (start_frame >= 1)')
        uniform = timestep.shape[1] == 1 and timestep_action.shape[1] == 1
        timestep = timestep.expand(batch, frames)
        timestep_action = timestep_action.expand(batch, num_action)
        x, grid = self.embed_video(latents.to(self.dtype), y)
        registers = self.embed_registers(
            action.to(self.dtype), timestep_action, state.to(self.dtype)
        )
        stride = num_action // c.num_state_per_block
        timesteps = torch.cat([timestep, timestep_action, timestep_action[:, ::stride]], dim=1)
        e, e0 = self.time_embeddings(timesteps)
        rotary = self.rotary(start_frame, grid, registers=True)
        video_len = x.shape[1]
        cache.begin(video_len, registers.shape[1])
        modulation = Modulation(e0, grid[0], uniform)
        x = self.run_blocks(torch.cat([x, registers], dim=1), modulation, rotary, context, cache)
        action_out = self.action_decoder(x[:, video_len : video_len + num_action])
        video_out = self.head(x[:, :video_len], e[:, :frames], frames)
        return DiTOutput(self.unpatchify(video_out, grid), action_out)
