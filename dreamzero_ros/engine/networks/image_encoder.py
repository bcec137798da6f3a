# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The open-CLIP ViT-H/14 image encoder, as Wan 2.1 I2V and DreamZero use it.

The vision tower of open-CLIP XLM-RoBERTa-large ViT-H/14: the first frame of a context window is
resized to 224 x 224 (bicubic), mapped from ``[-1, 1]`` to ``[0, 1]``, normalised with the CLIP
mean and std, and run through the patch embedding, class token, position embedding, pre-norm and
all but the last of the 32 transformer blocks. Those 257 tokens of width 1280 (no final norm, no
head) condition the DiT's image cross-attention.

The state_dict keys are upstream's ``WanImageEncoder`` keys (``model.log_scale``,
``model.visual.*``), so the checkpoint's ``action_head.image_encoder.*`` tensors load unchanged;
the final block, ``post_norm`` and ``head`` are loaded but not used.
"""

from __future__ import annotations

from dataclasses import dataclass
import math

import torch
from torch import nn
import torch.nn.functional as F  # noqa: N812


@dataclass(frozen=True)
class CLIPConfig:
    """Shape and preprocessing of the CLIP vision tower.

    Attributes:
        image_size: side of the square input the image is resized to.
        patch_size: side of the square patches.
        dim: transformer width (the width of the output tokens).
        mlp_ratio: MLP hidden width as a multiple of ``dim``.
        num_heads: attention heads.
        num_layers: transformer blocks in the checkpoint; the output is taken after
            ``num_layers - 1`` of them (the penultimate block).
        embed_dim: width of the (unused) projection head.
        norm_eps: epsilon of the LayerNorms.
        mean: per-channel mean of the CLIP normalisation (RGB, on ``[0, 1]`` pixels).
        std: per-channel std of the CLIP normalisation.

    """

    image_size: int = 224
    patch_size: int = 14
    dim: int = 1280
    mlp_ratio: int = 4
    num_heads: int = 16
    num_layers: int = 32
    embed_dim: int = 1024
    norm_eps: float = 1e-5
    mean: tuple[float, float, float] = (0.48145466, 0.4578275, 0.40821073)
    std: tuple[float, float, float] = (0.26862954, 0.26130258, 0.27577711)

    @classmethod
    def vit_h_14(cls) -> CLIPConfig:
        """open-CLIP ViT-H/14 (XLM-RoBERTa-large CLIP) as in Wan 2.1 I2V: 257 x 1280 tokens."""
        return cls()

    @classmethod
    def tiny(cls) -> CLIPConfig:
        """A small tower of the same structure and token count for CPU tests and the demo."""
        return cls(dim=32, num_heads=4, num_layers=3, embed_dim=16)

    def __post_init__(self) -> None:
        if self.image_size % self.patch_size:
            raise ValueError(f'image_size {self.image_size} not divisible by {self.patch_size}')
        if self.dim % self.num_heads:
            raise ValueError(f'dim {self.dim} not divisible by {self.num_heads} heads')
        if self.num_layers < 2:
            raise ValueError('num_layers must be at least 2 (the output is the penultimate block)')

    @property
    def num_tokens(self) -> int:
        """Output tokens per image: one per patch plus the class token (257 for ViT-H/14)."""
        return (self.image_size // self.patch_size) ** 2 + 1


class LayerNorm(nn.LayerNorm):
    """LayerNorm computed in float32 and returned in the input dtype (upstream under autocast)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise over the last dimension."""
        return F.layer_norm(
            x.float(), self.normalized_shape, self.weight.float(), self.bias.float(), self.eps
        ).type_as(x)


class SelfAttention(nn.Module):
    """Multi-head self-attention with a fused QKV projection."""

    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.to_qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attend ``x (B, L, C)``."""
        b, length, c = x.shape
        qkv = self.to_qkv(x).view(b, length, 3, self.num_heads, c // self.num_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(b, length, c))


class AttentionBlock(nn.Module):
    """Pre-norm transformer block with a GELU MLP."""

    def __init__(self, dim: int, mlp_ratio: int, num_heads: int, eps: float) -> None:
        super().__init__()
        self.norm1 = LayerNorm(dim, eps=eps)
        self.attn = SelfAttention(dim, num_heads)
        self.norm2 = LayerNorm(dim, eps=eps)
        self.mlp = nn.Sequential(
            nn.Linear(dim, dim * mlp_ratio), nn.GELU(), nn.Linear(dim * mlp_ratio, dim)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply attention and MLP, each with a residual."""
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    """The ViT tower; :meth:`forward` returns the penultimate block's tokens."""

    def __init__(self, config: CLIPConfig) -> None:
        super().__init__()
        gain = 1.0 / math.sqrt(config.dim)
        self.patch_embedding = nn.Conv2d(
            3, config.dim, kernel_size=config.patch_size, stride=config.patch_size, bias=False
        )
        self.cls_embedding = nn.Parameter(gain * torch.randn(1, 1, config.dim))
        self.pos_embedding = nn.Parameter(gain * torch.randn(1, config.num_tokens, config.dim))
        self.pre_norm = LayerNorm(config.dim, eps=config.norm_eps)
        self.transformer = nn.Sequential(
            *(
                AttentionBlock(config.dim, config.mlp_ratio, config.num_heads, config.norm_eps)
                for _ in range(config.num_layers)
            )
        )
        self.post_norm = LayerNorm(config.dim, eps=config.norm_eps)
        self.head = nn.Parameter(gain * torch.randn(config.dim, config.embed_dim))

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        """Tokens ``(B, 1 + patches, dim)`` after all blocks but the last, for normalised pixels."""
        x = self.patch_embedding(pixels).flatten(2).transpose(1, 2)
        cls = self.cls_embedding.to(x.dtype).expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos_embedding.to(x.dtype)
        x = self.pre_norm(x)
        for block in self.transformer[:-1]:
            x = block(x)
        return x


class OpenCLIPVision(nn.Module):
    """open-CLIP model with only its vision tower (and the logit scale the checkpoint carries)."""

    def __init__(self, config: CLIPConfig) -> None:
        super().__init__()
        self.visual = VisionTransformer(config)
        self.log_scale = nn.Parameter(math.log(1 / 0.07) * torch.ones([]))


class CLIPImageEncoder(nn.Module):
    """Images in ``[-1, 1]`` to CLIP tokens, as upstream ``WanImageEncoder.encode_image``."""

    def __init__(self, config: CLIPConfig) -> None:
        super().__init__()
        self.config = config
        self.model = OpenCLIPVision(config)

    def preprocess(self, images: torch.Tensor) -> torch.Tensor:
        """Resize ``(B, 3, H, W)`` images in ``[-1, 1]`` to the CLIP input, normalised, float32."""
        if images.ndim != 4 or images.shape[1] != 3:
            raise ValueError(f'images must be (B, 3, H, W), got {tuple(images.shape)}')
        if not images.is_floating_point():
            raise ValueError(f'images must be floating point in [-1, 1], got {images.dtype}')
        size = (self.config.image_size, self.config.image_size)
        x = F.interpolate(images.float(), size=size, mode='bicubic', align_corners=False)
        mean = torch.tensor(self.config.mean, device=x.device).view(1, 3, 1, 1)
        std = torch.tensor(self.config.std, device=x.device).view(1, 3, 1, 1)
        return (x * 0.5 + 0.5 - mean) / std

    @torch.no_grad()
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Encode ``(B, 3, H, W)`` float images in ``[-1, 1]`` (any size; resized to 224).

        Returns:
            ``(B, num_tokens, dim)`` (257 x 1280 for ViT-H/14) in the dtype of the weights.

        """
        pixels = self.preprocess(images).to(self.model.visual.patch_embedding.weight.dtype)
        return self.model.visual(pixels)
