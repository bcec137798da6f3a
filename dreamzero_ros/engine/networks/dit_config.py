# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The shape of the causal DiT (:mod:`.dit`): upstream ``CausalWanModel``'s arguments."""

from __future__ import annotations

from dataclasses import dataclass

from dreamzero_ros.engine.networks.rope import video_axis_pairs

__all__ = ['DiTConfig']


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
