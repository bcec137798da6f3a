# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""FP8 (e4m3) linear layers through ``torch._scaled_mm`` (Hopper tensor cores).

A weight is quantized once (:func:`quantize_weight`); each call quantizes its input on the fly
(:func:`fp8_linear`) and multiplies in FP8 with float32 accumulation, the scales applied in the
epilogue and the output in the activation dtype.  Two scalings:

* ``rowwise``: one scale per input row (token) and one per output channel (weight row) -- the
  finer, more accurate one;
* ``tensorwise``: one scale for the whole input and one for the whole weight.

Scales are ``amax / 448`` (the largest e4m3 value), so every value is representable; the
rounding error is that of a 3-bit mantissa (about 2^-4 relative per element).  Inputs and
weights need a last dimension that is a multiple of 16, outputs too.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .option_names import FP8_MODES

__all__ = ['FP8_MODES', 'Fp8Weight', 'fp8_linear', 'quantize', 'quantize_weight']

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = float(torch.finfo(FP8_DTYPE).max)  # 448
_MIN_AMAX = 1e-12


@dataclass(frozen=True)
class Fp8Weight:
    """A quantized linear layer: ``y = (x @ weight.T) * scale + bias``.

    Attributes:
        weight: ``(out, in)`` e4m3 values.
        scale: float32 ``(1, out)`` (rowwise) or ``()`` (tensorwise).
        bias: ``(out,)`` in the model dtype, or None.

    """

    weight: torch.Tensor
    scale: torch.Tensor
    bias: torch.Tensor | None

    def as_tuple(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """``(weight, scale, bias)``: plain tensors for compiled code."""
        return self.weight, self.scale, self.bias


def quantize(x: torch.Tensor, rowwise: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x_fp8, scale)`` of a 2-D ``x`` with ``x ~= x_fp8 * scale``.

    ``scale`` is ``(rows, 1)`` for ``rowwise``, else a 0-d tensor; float32.
    """
    xf = x.float()
    amax = xf.abs().amax(dim=1, keepdim=True) if rowwise else xf.abs().amax()
    scale = amax.clamp(min=_MIN_AMAX) / FP8_MAX
    return (xf / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE), scale


@torch.no_grad()
def quantize_weight(weight: torch.Tensor, bias: torch.Tensor | None, mode: str) -> Fp8Weight:
    """Quantize a linear layer's ``weight (out, in)`` with the scaling ``mode``."""
    if mode not in FP8_MODES[1:]:
        raise ValueError(f'fp8 scaling must be one of {FP8_MODES[1:]}, got {mode!r}')
    out_features, in_features = weight.shape
    if out_features % 16 or in_features % 16:
        raise ValueError(
            f'FP8 linears need dimensions that are multiples of 16, got {tuple(weight.shape)}'
        )
    rowwise = mode == 'rowwise'
    values, scale = quantize(weight, rowwise)
    if rowwise:
        scale = scale.reshape(1, out_features).contiguous()
    return Fp8Weight(values.contiguous(), scale, bias)


def fp8_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None,
) -> torch.Tensor:
    """``x @ W.T + bias`` with ``x`` quantized like the weight (see :class:`Fp8Weight`).

    ``x (..., in)`` in bfloat16 (or another float dtype on the CPU); returns ``(..., out)`` in
    ``x``'s dtype.  The scaling (rowwise or tensorwise) follows ``scale``'s shape.
    """
    rows = x.reshape(-1, x.shape[-1])
    values, x_scale = quantize(rows, rowwise=scale.ndim == 2)
    out = torch._scaled_mm(
        values, weight.t(), scale_a=x_scale, scale_b=scale, bias=bias, out_dtype=x.dtype
    )
    return out.view(*x.shape[:-1], weight.shape[0])
