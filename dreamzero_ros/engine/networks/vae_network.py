# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The Wan 2.1 video VAE network: causal 3-D convolutions, 8x spatial and 4x temporal compression.

Every temporal convolution is causal and keeps the last frames of its input in a
:data:`StreamState` as history for the next piece, so a video can be encoded piece by piece with
the same result as all at once (:mod:`.vae` runs the pieces).  Each norm, SiLU and causal
convolution of a residual block runs through a :class:`NormConv`: :func:`norm_silu_conv`, or
the compiled one of :mod:`.vae_fused`.

The state_dict keys are upstream's ``WanVideoVAE`` keys (``model.encoder.*``, ``model.conv1.*``,
``model.conv2.*``, ``model.decoder.*``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn
import torch.nn.functional as F  # noqa: N812

__all__ = [
    'HISTORY_FRAMES',
    'SPATIAL_FACTOR',
    'TEMPORAL_FACTOR',
    'CausalConv3d',
    'Decoder3d',
    'Encoder3d',
    'NormConv',
    'RMSNorm',
    'StreamState',
    'VAEConfig',
    'VideoVAE',
    'causal_conv',
    'norm_silu_conv',
]

#: Frames of history a causal 3x3x3 convolution keeps between pieces.
HISTORY_FRAMES = 2
#: Spatial down-sampling factor of the encoder (and up-sampling of the decoder).
SPATIAL_FACTOR = 8
#: Video frames per latent frame after the first.
TEMPORAL_FACTOR = 4

# PyTorch's CPU heuristics send narrow 3-D convolutions to a slow reference kernel. From this frame
# area (pixels) on, the same convolution done as a 2-D one is several times faster there.
_CPU_2D_AREA = 32 * 32

#: Per-module streaming state: the history each causal layer keeps between pieces.
StreamState = dict[nn.Module, torch.Tensor]

_WAN21_MEAN = (
    -0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508,
    0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921,
)  # fmt: skip
_WAN21_STD = (
    2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
    3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160,
)  # fmt: skip


@dataclass(frozen=True)
class VAEConfig:
    """Shape of the Wan video VAE.

    Attributes:
        dim: channels of the first level; level ``i`` has ``dim * dim_mult[i]``.
        z_dim: latent channels.
        dim_mult: channel multipliers of the four resolution levels.
        num_res_blocks: residual blocks per encoder level (the decoder has one more).
        temporal_downsample: per level transition, whether the encoder also halves time
            (the decoder mirrors it).
        latents_mean: per-channel mean subtracted from encoder latents.
        latents_std: per-channel std the centred latents are divided by.

    """

    dim: int = 96
    z_dim: int = 16
    dim_mult: tuple[int, ...] = (1, 2, 4, 4)
    num_res_blocks: int = 2
    temporal_downsample: tuple[bool, ...] = (False, True, True)
    latents_mean: tuple[float, ...] = _WAN21_MEAN
    latents_std: tuple[float, ...] = _WAN21_STD

    @classmethod
    def wan21(cls) -> VAEConfig:
        """The Wan 2.1 VAE (z 16, 127 M parameters)."""
        return cls()

    @classmethod
    def tiny(cls) -> VAEConfig:
        """Same structure and latent space with narrow channels, for CPU tests and the demo."""
        return cls(dim=8)

    def __post_init__(self) -> None:
        if len(self.dim_mult) != 4 or len(self.temporal_downsample) != 3:
            raise ValueError('the Wan VAE has 4 levels: dim_mult needs 4 entries, '
                             'temporal_downsample 3')  # fmt: skip
        if sum(self.temporal_downsample) != 2:
            raise ValueError('temporal_downsample must halve time twice (4x compression)')
        if len(self.latents_mean) != self.z_dim or len(self.latents_std) != self.z_dim:
            raise ValueError(f'latents_mean and latents_std need z_dim={self.z_dim} entries')


class CausalConv3d(nn.Conv3d):
    """3-D convolution padded only towards the past in time, optionally with given history."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int, int],
        stride: int | tuple[int, int, int] = 1,
        padding: int | tuple[int, int, int] = 0,
    ) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride=stride)
        pad_t, pad_h, pad_w = (padding,) * 3 if isinstance(padding, int) else padding
        self.time_padding = 2 * pad_t
        self.space_padding = (pad_h, pad_w)

    def forward(self, x: torch.Tensor, history: torch.Tensor | None = None) -> torch.Tensor:
        """Convolve ``x (B, C, T, H, W)``; ``history`` frames replace that much zero padding."""
        time_padding = self.time_padding
        if history is not None and time_padding > 0:
            x = torch.cat([history, x], dim=2)
            time_padding -= history.shape[2]
        if time_padding:
            x = F.pad(x, (0, 0, 0, 0, time_padding, 0))
        return self.convolve(x)

    def convolve(self, x: torch.Tensor) -> torch.Tensor:
        """Convolve ``x`` that already holds its past frames (no time padding added)."""
        if (
            x.device.type == 'cpu'
            and self.kernel_size[0] > 1
            and x.shape[3] * x.shape[4] >= _CPU_2D_AREA
        ):
            return self._forward_as_2d(x)
        return F.conv3d(x, self.weight, self.bias, self.stride, (0, *self.space_padding))

    def _forward_as_2d(self, x: torch.Tensor) -> torch.Tensor:
        """The same convolution as a 2-D one, the frames of each time window stacked as channels."""
        kt, st = self.kernel_size[0], self.stride[0]
        b, c, t, h, w = x.shape
        t_out = (t - kt) // st + 1
        last = st * (t_out - 1) + 1
        windows = torch.stack([x[:, :, k : k + last : st] for k in range(kt)], dim=3)
        windows = windows.permute(0, 2, 1, 3, 4, 5).reshape(b * t_out, c * kt, h, w)
        weight = self.weight.reshape(self.out_channels, c * kt, *self.kernel_size[1:])
        y = F.conv2d(windows, weight, self.bias, self.stride[1:], self.space_padding)
        return y.reshape(b, t_out, *y.shape[1:]).transpose(1, 2)


def causal_conv(conv: CausalConv3d, x: torch.Tensor, state: StreamState) -> torch.Tensor:
    """Apply ``conv`` with its stored history and keep the last frames of ``x`` as the next."""
    history = state.get(conv)
    if history is None or x.shape[2] >= HISTORY_FRAMES:
        state[conv] = x[:, :, -HISTORY_FRAMES:].clone()
    else:
        state[conv] = torch.cat([history, x], dim=2)[:, :, -HISTORY_FRAMES:].clone()
    return conv(x, history)


class RMSNorm(nn.Module):
    """Channel-wise RMS norm (L2-normalise over channels, times sqrt(C) and a learned gain)."""

    def __init__(self, dim: int, images: bool = True) -> None:
        super().__init__()
        self.scale = dim**0.5
        self.gamma = nn.Parameter(torch.ones(dim, 1, 1) if images else torch.ones(dim, 1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise ``x (B, C, ...)`` over ``C`` in float32 (as ``F.normalize``, eps 1e-12)."""
        x32 = x.float()
        inv_norm = torch.rsqrt(x32.square().sum(dim=1, keepdim=True).clamp_min(1e-24))
        return (x32 * inv_norm * (self.scale * self.gamma.float())).type_as(x)


def _per_frame(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Apply a 2-D module to every frame of ``x (B, C, T, H, W)``."""
    b, c, t, h, w = x.shape
    y = module(x.transpose(1, 2).reshape(b * t, c, h, w))
    return y.reshape(b, t, *y.shape[1:]).transpose(1, 2)


class NormConv(Protocol):
    """RMS norm, SiLU, then a causal convolution with the stream's history.

    The reference is :func:`norm_silu_conv`; :class:`.vae_fused.FusedNormConv` is faster.
    """

    def __call__(
        self, norm: RMSNorm, conv: CausalConv3d, x: torch.Tensor, state: StreamState
    ) -> torch.Tensor:
        """``conv(silu(norm(x)))`` with ``conv``'s history in ``state``; updates ``state``."""
        ...


def norm_silu_conv(
    norm: RMSNorm, conv: CausalConv3d, x: torch.Tensor, state: StreamState
) -> torch.Tensor:
    """The reference :class:`NormConv`: the three layers one after the other."""
    return causal_conv(conv, F.silu(norm(x)), state)


class ResidualBlock(nn.Module):
    """Two causal 3x3x3 convolutions with RMS norm and SiLU, plus a (1x1x1) shortcut."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.residual = nn.Sequential(
            RMSNorm(in_dim, images=False),
            nn.SiLU(),
            CausalConv3d(in_dim, out_dim, 3, padding=1),
            RMSNorm(out_dim, images=False),
            nn.SiLU(),
            nn.Identity(),  # upstream's (inactive) dropout; keeps the state_dict indices
            CausalConv3d(out_dim, out_dim, 3, padding=1),
        )
        self.shortcut = CausalConv3d(in_dim, out_dim, 1) if in_dim != out_dim else nn.Identity()

    def forward(
        self, x: torch.Tensor, state: StreamState, norm_conv: NormConv = norm_silu_conv
    ) -> torch.Tensor:
        """Apply the block to the next piece ``x (B, C, T, H, W)``."""
        shortcut = self.shortcut(x)
        x = norm_conv(self.residual[0], self.residual[2], x, state)
        return norm_conv(self.residual[3], self.residual[6], x, state) + shortcut


class AttentionBlock(nn.Module):
    """Single-head self-attention over the pixels of each frame."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = RMSNorm(dim)
        self.to_qkv = nn.Conv2d(dim, dim * 3, 1)
        self.proj = nn.Conv2d(dim, dim, 1)
        nn.init.zeros_(self.proj.weight)

    def _attend(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        qkv = self.to_qkv(self.norm(x)).reshape(n, 1, c * 3, h * w).transpose(2, 3)
        q, k, v = qkv.chunk(3, dim=-1)
        out = F.scaled_dot_product_attention(q.contiguous(), k.contiguous(), v.contiguous())
        return self.proj(out.squeeze(1).transpose(1, 2).reshape(n, c, h, w))

    def forward(self, x: torch.Tensor, state: StreamState) -> torch.Tensor:
        """Attend within each frame of ``x (B, C, T, H, W)``; keeps no state."""
        return x + _per_frame(self._attend, x)


class Resample(nn.Module):
    """Spatial 2x up/down-sampling, with an optional causal 2x temporal change."""

    MODES = ('upsample2d', 'upsample3d', 'downsample2d', 'downsample3d')

    def __init__(self, dim: int, mode: str) -> None:
        super().__init__()
        if mode not in self.MODES:
            raise ValueError(f'unknown resample mode {mode!r}')
        self.mode = mode
        if mode.startswith('upsample'):
            self.resample = nn.Sequential(
                nn.Upsample(scale_factor=(2.0, 2.0), mode='nearest-exact'),
                nn.Conv2d(dim, dim // 2, 3, padding=1),
            )
        else:
            self.resample = nn.Sequential(
                nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(dim, dim, 3, stride=(2, 2))
            )
        if mode == 'upsample3d':
            self.time_conv = CausalConv3d(dim, dim * 2, (3, 1, 1), padding=(1, 0, 0))
        elif mode == 'downsample3d':
            self.time_conv = CausalConv3d(dim, dim, (3, 1, 1), stride=(2, 1, 1))

    def _double_time(self, x: torch.Tensor, state: StreamState) -> torch.Tensor:
        # The first piece passes through; later ones see zero history at first, like upstream.
        if self not in state:
            b, c, _, h, w = x.shape
            state[self] = x.new_zeros(b, c, HISTORY_FRAMES, h, w)
            return x
        history = state[self]
        state[self] = torch.cat([history, x], dim=2)[:, :, -HISTORY_FRAMES:].clone()
        y = self.time_conv(x, history)
        b, c2, t, h, w = y.shape
        # Channels [0, C) give the earlier and [C, 2C) the later of each pair of output frames.
        y = y.view(b, 2, c2 // 2, t, h, w).permute(0, 2, 3, 1, 4, 5)
        return y.reshape(b, c2 // 2, 2 * t, h, w)

    def _halve_time(self, x: torch.Tensor, state: StreamState) -> torch.Tensor:
        # The first piece passes through; later ones are strided with the previous last frame.
        history = state.get(self)
        state[self] = x[:, :, -1:].clone()
        if history is None:
            return x
        return self.time_conv(torch.cat([history, x], dim=2))

    def forward(self, x: torch.Tensor, state: StreamState) -> torch.Tensor:
        """Resample the next piece ``x (B, C, T, H, W)``."""
        if self.mode == 'upsample3d':
            x = self._double_time(x, state)
        x = _per_frame(self.resample, x)
        if self.mode == 'downsample3d':
            x = self._halve_time(x, state)
        return x


def _head(in_dim: int, out_dim: int) -> nn.Sequential:
    return nn.Sequential(
        RMSNorm(in_dim, images=False), nn.SiLU(), CausalConv3d(in_dim, out_dim, 3, padding=1)
    )


def _run(
    layers: nn.Sequential, x: torch.Tensor, state: StreamState, norm_conv: NormConv
) -> torch.Tensor:
    for layer in layers:
        if isinstance(layer, CausalConv3d):
            x = causal_conv(layer, x, state)
        elif isinstance(layer, ResidualBlock):
            x = layer(x, state, norm_conv)
        elif isinstance(layer, AttentionBlock | Resample):
            x = layer(x, state)
        else:
            x = layer(x)
    return x


def _stream(
    conv1: CausalConv3d,
    stages: tuple[nn.Sequential, ...],
    head: nn.Sequential,
    x: torch.Tensor,
    state: StreamState,
    norm_conv: NormConv,
) -> torch.Tensor:
    """The next piece through ``conv1``, the layers of ``stages``, then ``head``'s norm and conv."""
    x = causal_conv(conv1, x, state)
    for layers in stages:
        x = _run(layers, x, state, norm_conv)
    return norm_conv(head[0], head[2], x, state)


class Encoder3d(nn.Module):
    """Video ``(B, 3, T, H, W)`` to latent moments ``(B, 2 z, T', H/8, W/8)``."""

    def __init__(self, config: VAEConfig) -> None:
        super().__init__()
        dims = [config.dim * mult for mult in (1, *config.dim_mult)]
        self.conv1 = CausalConv3d(3, dims[0], 3, padding=1)
        layers: list[nn.Module] = []
        for level, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
            for _ in range(config.num_res_blocks):
                layers.append(ResidualBlock(in_dim, out_dim))
                in_dim = out_dim
            if level < len(config.dim_mult) - 1:
                temporal = config.temporal_downsample[level]
                layers.append(Resample(out_dim, 'downsample3d' if temporal else 'downsample2d'))
        self.downsamples = nn.Sequential(*layers)
        self.middle = nn.Sequential(
            ResidualBlock(dims[-1], dims[-1]), AttentionBlock(dims[-1]),
            ResidualBlock(dims[-1], dims[-1]),
        )  # fmt: skip
        self.head = _head(dims[-1], config.z_dim * 2)

    def forward(
        self, x: torch.Tensor, state: StreamState, norm_conv: NormConv = norm_silu_conv
    ) -> torch.Tensor:
        """Encode the next piece of video (``norm_conv``: how norm, SiLU and convolution run)."""
        stages = (self.downsamples, self.middle)
        return _stream(self.conv1, stages, self.head, x, state, norm_conv)


class Decoder3d(nn.Module):
    """Latents ``(B, z, T', h, w)`` to video ``(B, 3, T, 8 h, 8 w)``."""

    def __init__(self, config: VAEConfig) -> None:
        super().__init__()
        mults = config.dim_mult
        dims = [config.dim * mult for mult in (mults[-1], *mults[::-1])]
        temporal_upsample = config.temporal_downsample[::-1]
        self.conv1 = CausalConv3d(config.z_dim, dims[0], 3, padding=1)
        self.middle = nn.Sequential(
            ResidualBlock(dims[0], dims[0]), AttentionBlock(dims[0]),
            ResidualBlock(dims[0], dims[0]),
        )  # fmt: skip
        layers: list[nn.Module] = []
        for level, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
            if level > 0:
                in_dim //= 2  # the previous level's up-sampling halved the channels
            for _ in range(config.num_res_blocks + 1):
                layers.append(ResidualBlock(in_dim, out_dim))
                in_dim = out_dim
            if level < len(mults) - 1:
                temporal = temporal_upsample[level]
                layers.append(Resample(out_dim, 'upsample3d' if temporal else 'upsample2d'))
        self.upsamples = nn.Sequential(*layers)
        self.head = _head(dims[-1], 3)

    def forward(self, x: torch.Tensor, state: StreamState) -> torch.Tensor:
        """Decode the next piece of latents."""
        stages = (self.middle, self.upsamples)
        return _stream(self.conv1, stages, self.head, x, state, norm_silu_conv)


class VideoVAE(nn.Module):
    """Encoder, decoder and the 1x1x1 convolutions around the latent space."""

    def __init__(self, config: VAEConfig) -> None:
        super().__init__()
        self.encoder = Encoder3d(config)
        self.conv1 = CausalConv3d(config.z_dim * 2, config.z_dim * 2, 1)
        self.conv2 = CausalConv3d(config.z_dim, config.z_dim, 1)
        self.decoder = Decoder3d(config)
