# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The VAE encoder's norm, SiLU and causal time padding compiled into one kernel per layer."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F  # noqa: N812

from dreamzero_ros.engine.networks.vae_network import (
    HISTORY_FRAMES,
    CausalConv3d,
    RMSNorm,
    StreamState,
)

__all__ = ['FusedNormConv']


def _norm_silu_after(past: torch.Tensor, x: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
    """``cat([past, silu(rms_norm(x))])`` on rows of channels: ``(M, C), (N, C) -> (M + N, C)``.

    The float32 RMS norm of :class:`RMSNorm` (``gain = sqrt(C) * gamma``), the SiLU after it
    and the causal convolution's past frames in front, in one kernel when compiled.
    """
    x32 = x.float()
    inv_norm = torch.rsqrt(x32.square().sum(dim=1, keepdim=True).clamp_min(1e-24))
    return torch.cat([past, F.silu((x32 * inv_norm * gain).type_as(x))])


_COMPILED_NORM_SILU: dict[str, Callable[..., torch.Tensor]] = {}


def _channel_rows(x: torch.Tensor) -> torch.Tensor:
    """``x (1, C, T, H, W)`` as contiguous ``(T H W, C)`` rows (a view in ``channels_last_3d``)."""
    return x[0].permute(1, 2, 3, 0).reshape(-1, x.shape[1]).contiguous()


class FusedNormConv:
    """RMS norm, SiLU and a causal 3x3x3 convolution, with the first two compiled.

    The compiled kernel normalises the channels of every pixel and writes the result after the
    convolution's two past frames (the stream's history, zeros at the start), so the norm's
    float32 temporaries, the SiLU and the time padding cost one read and one write of the
    activations; cuDNN then convolves that buffer.  Same values as :class:`RMSNorm`,
    :class:`torch.nn.SiLU` and :func:`causal_conv`, up to the compiler's rounding.

    Args:
        backend: ``torch.compile`` backend (compiled once per process, dynamic shapes).

    """

    def __init__(self, backend: str) -> None:
        kernel = _COMPILED_NORM_SILU.get(backend)
        if kernel is None:
            kernel = torch.compile(_norm_silu_after, backend=backend, dynamic=True, fullgraph=True)
            _COMPILED_NORM_SILU[backend] = kernel
        self._kernel = kernel

    def __call__(
        self, norm: RMSNorm, conv: CausalConv3d, x: torch.Tensor, state: StreamState
    ) -> torch.Tensor:
        """``conv(silu(norm(x)))`` with the stream's history of ``conv``; updates ``state``."""
        if conv.time_padding != HISTORY_FRAMES:
            raise ValueError('FusedNormConv needs a causal convolution over 3 frames')
        if x.shape[0] != 1:
            raise ValueError('FusedNormConv encodes one video at a time')
        _, c, t, h, w = x.shape
        history = state.get(conv)
        held = 0 if history is None else history.shape[2]
        past = x.new_zeros((HISTORY_FRAMES - held) * h * w, c)
        if history is not None:
            rows = _channel_rows(history)
            past = torch.cat([past, rows]) if held < HISTORY_FRAMES else rows
        gain = norm.scale * norm.gamma.float().reshape(1, c)
        padded = self._kernel(past, _channel_rows(x), gain)
        frames = padded.view(1, HISTORY_FRAMES + t, h, w, c).permute(0, 4, 1, 2, 3)
        state[conv] = frames[:, :, -HISTORY_FRAMES:].clone()
        return conv.convolve(frames)
