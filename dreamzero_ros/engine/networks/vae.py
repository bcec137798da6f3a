# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The Wan 2.1 video VAE (upstream ``WanVideoVAE``): encoding and decoding, whole or streamed.

A video of ``1 + 4k`` frames maps to ``1 + k`` latent frames of 16 channels: the first frame is
encoded alone, then every group of 4 frames gives one latent frame.  The network
(:mod:`.vae_network`) is causal, so a video can be encoded piece by piece
(:class:`VAEEncodeStream`) with the same result as all at once.  Decoding is the mirror image
(:class:`VAEDecodeStream`): one frame from the first latent frame, then 4 per latent frame.
Latents are normalised per channel with Wan's mean and std.

The state_dict keys are upstream's, so the checkpoint's ``action_head.vae.*`` tensors load
unchanged.  Upstream's tiled mode (off in DreamZero's config) is not implemented.
"""

from __future__ import annotations

import torch
from torch import nn

from dreamzero_ros.engine.networks.vae_network import (
    SPATIAL_FACTOR,
    TEMPORAL_FACTOR,
    NormConv,
    StreamState,
    VAEConfig,
    VideoVAE,
    norm_silu_conv,
)

__all__ = ['VAEDecodeStream', 'VAEEncodeStream', 'WanVAE']


def _check_video(video: torch.Tensor, what: str) -> None:
    if video.ndim != 5 or video.shape[1] != 3:
        raise ValueError(f'{what} must be (B, 3, T, H, W), got {tuple(video.shape)}')
    if not video.is_floating_point():
        raise ValueError(f'{what} must be floating point in [-1, 1], got {video.dtype}')
    height, width = video.shape[-2:]
    if height % SPATIAL_FACTOR or width % SPATIAL_FACTOR or not height or not width:
        raise ValueError(
            f'{what} height and width must be positive multiples of {SPATIAL_FACTOR}, '
            f'got {height}x{width}'
        )


class WanVAE(nn.Module):
    """The Wan 2.1 VAE with normalised latents (upstream ``WanVideoVAE``, untiled)."""

    def __init__(self, config: VAEConfig) -> None:
        super().__init__()
        self.config = config
        self.model = VideoVAE(config)

    @property
    def dtype(self) -> torch.dtype:
        """Dtype of the weights (inputs are cast to it)."""
        return self.model.conv1.weight.dtype

    def latent_scale(self, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Latent mean and inverse std ``(1, z, 1, 1, 1)`` in the dtype and device of ``like``."""
        shape = (1, self.config.z_dim, 1, 1, 1)
        mean = torch.tensor(self.config.latents_mean, device=like.device).view(shape)
        inv_std = 1.0 / torch.tensor(self.config.latents_std, device=like.device).view(shape)
        return mean.to(like.dtype), inv_std.to(like.dtype)

    def encode_stream(
        self,
        frames_per_pass: int = TEMPORAL_FACTOR,
        channels_last: bool = False,
        norm_conv: NormConv = norm_silu_conv,
    ) -> VAEEncodeStream:
        """Start encoding a video piece by piece (see :class:`VAEEncodeStream`)."""
        return VAEEncodeStream(self, frames_per_pass, channels_last, norm_conv)

    def decode_stream(self, latents_per_pass: int = 1) -> VAEDecodeStream:
        """Start decoding latents piece by piece (see :class:`VAEDecodeStream`)."""
        return VAEDecodeStream(self, latents_per_pass)

    def encode(
        self,
        video: torch.Tensor,
        frames_per_pass: int = TEMPORAL_FACTOR,
        channels_last: bool = False,
        norm_conv: NormConv = norm_silu_conv,
    ) -> torch.Tensor:
        """Encode ``video (B, 3, 1 + 4k, H, W)`` in ``[-1, 1]``; H and W multiples of 8.

        ``frames_per_pass`` (a multiple of 4, or 0 for all frames after the first in one pass)
        trades memory for speed; upstream uses 4.  ``channels_last`` runs the convolutions on
        ``channels_last_3d`` activations (the layout tensor cores prefer).  ``norm_conv`` runs
        each norm, SiLU and convolution of a residual block (:class:`.vae_network.NormConv`;
        :class:`.vae_fused.FusedNormConv` compiles the first two into one kernel).  These change
        only the rounding, not the result.

        Returns:
            Normalised latents ``(B, z_dim, 1 + k, H/8, W/8)`` in the dtype of the weights.

        """
        _check_video(video, 'video')
        if (video.shape[2] - 1) % TEMPORAL_FACTOR:
            raise ValueError(f'video must have 1 + 4k frames, got {video.shape[2]}')
        if frames_per_pass == 0:
            frames_per_pass = max(TEMPORAL_FACTOR, video.shape[2] - 1)
        return self.encode_stream(frames_per_pass, channels_last, norm_conv).push(video)

    def decode(self, latents: torch.Tensor, latents_per_pass: int = 1) -> torch.Tensor:
        """Decode normalised ``latents (B, z_dim, n, h, w)``.

        Returns:
            Video ``(B, 3, 1 + 4 (n - 1), 8 h, 8 w)`` clamped to ``[-1, 1]``, weights' dtype.

        """
        return self.decode_stream(latents_per_pass).push(latents)


class VAEEncodeStream:
    """Causal encoding of one batch of videos that arrives a few frames at a time.

    The first frame becomes the first latent frame; after it, every 4 frames give one more.
    Frames of an incomplete group wait for the next :meth:`push`. The concatenated outputs equal
    :meth:`WanVAE.encode` of the whole video.  ``frames_per_pass``, ``channels_last`` and
    ``norm_conv`` are the speed options of :meth:`WanVAE.encode`.
    """

    def __init__(
        self,
        vae: WanVAE,
        frames_per_pass: int = TEMPORAL_FACTOR,
        channels_last: bool = False,
        norm_conv: NormConv = norm_silu_conv,
    ) -> None:
        if frames_per_pass < TEMPORAL_FACTOR or frames_per_pass % TEMPORAL_FACTOR:
            raise ValueError(f'frames_per_pass must be a positive multiple of {TEMPORAL_FACTOR}')
        self._vae = vae
        self._frames_per_pass = frames_per_pass
        self._memory_format = torch.channels_last_3d if channels_last else torch.contiguous_format
        self._norm_conv = norm_conv
        self._state: StreamState = {}
        self._pending: torch.Tensor | None = None
        self._started = False

    @torch.no_grad()
    def push(self, frames: torch.Tensor) -> torch.Tensor:
        """Add ``frames (B, 3, t, H, W)`` in ``[-1, 1]``.

        Returns:
            The latent frames completed by them, ``(B, z_dim, n, H/8, W/8)`` (n may be 0).

        """
        _check_video(frames, 'frames')
        frames = frames.to(self._vae.dtype, memory_format=self._memory_format)
        if self._pending is not None:
            pending = self._pending.shape
            if frames.shape[:2] != pending[:2] or frames.shape[3:] != pending[3:]:
                raise ValueError(
                    f'frames {tuple(frames.shape)} do not continue the stream of '
                    f'{tuple(self._pending.shape)}'
                )
            frames = torch.cat([self._pending, frames], dim=2)
        pieces = []
        if not self._started and frames.shape[2] > 0:
            pieces.append(self._encode(frames[:, :, :1]))
            frames = frames[:, :, 1:]
            self._started = True
        while frames.shape[2] >= TEMPORAL_FACTOR:
            count = min(self._frames_per_pass, frames.shape[2] // TEMPORAL_FACTOR * TEMPORAL_FACTOR)
            pieces.append(self._encode(frames[:, :, :count]))
            frames = frames[:, :, count:]
        self._pending = frames
        if not pieces:
            b, _, _, h, w = frames.shape
            z_dim = self._vae.config.z_dim
            return frames.new_zeros(b, z_dim, 0, h // SPATIAL_FACTOR, w // SPATIAL_FACTOR)
        return torch.cat(pieces, dim=2)

    def _encode(self, frames: torch.Tensor) -> torch.Tensor:
        model = self._vae.model
        moments = model.conv1(model.encoder(frames, self._state, self._norm_conv))
        mu = moments.chunk(2, dim=1)[0]
        mean, inv_std = self._vae.latent_scale(mu)
        return ((mu - mean) * inv_std).contiguous()


class VAEDecodeStream:
    """Causal decoding of one batch of latent sequences that arrives a few frames at a time.

    The first latent frame gives one video frame, every later one gives 4. The concatenated
    outputs equal :meth:`WanVAE.decode` of all the latents.
    """

    def __init__(self, vae: WanVAE, latents_per_pass: int = 1) -> None:
        if latents_per_pass < 1:
            raise ValueError('latents_per_pass must be positive')
        self._vae = vae
        self._latents_per_pass = latents_per_pass
        self._state: StreamState = {}
        self._started = False

    @torch.no_grad()
    def push(self, latents: torch.Tensor) -> torch.Tensor:
        """Add normalised ``latents (B, z_dim, n, h, w)``, n >= 1.

        Returns:
            The video frames they decode to, ``(B, 3, t, 8 h, 8 w)`` in ``[-1, 1]``.

        """
        z_dim = self._vae.config.z_dim
        if latents.ndim != 5 or latents.shape[1] != z_dim or latents.shape[2] < 1:
            raise ValueError(
                f'latents must be (B, {z_dim}, n >= 1, h, w), got {tuple(latents.shape)}'
            )
        if not latents.is_floating_point():
            raise ValueError(f'latents must be floating point, got {latents.dtype}')
        model = self._vae.model
        latents = latents.to(self._vae.dtype)
        mean, inv_std = self._vae.latent_scale(latents)
        x = model.conv2(latents / inv_std + mean)
        pieces = []
        if not self._started:
            pieces.append(model.decoder(x[:, :, :1], self._state))
            x = x[:, :, 1:]
            self._started = True
        for start in range(0, x.shape[2], self._latents_per_pass):
            piece = x[:, :, start : start + self._latents_per_pass]
            pieces.append(model.decoder(piece, self._state))
        return torch.cat(pieces, dim=2).clamp_(-1.0, 1.0)
