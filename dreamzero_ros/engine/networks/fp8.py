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

:class:`Fp8Linear` holds a linear layer's weight in FP8 *instead of* the model-dtype weight (one
byte per value, no second copy); :func:`quantize_linears_` replaces a module's ``nn.Linear``
children by such layers, quantizing their values (or, on the ``meta`` device, only their
shapes, so that a model can be built in FP8 and loaded tensor by tensor with
:meth:`Fp8Linear.load_`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from dreamzero_ros.engine.option_names import FP8_MODES

__all__ = [
    'FP8_MODES',
    'Fp8Linear',
    'Fp8Weight',
    'fp8_linear',
    'quantize',
    'quantize_linears_',
    'quantize_weight',
]

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


class Fp8Linear(nn.Module):
    """A linear layer whose weight is held in FP8 e4m3 with its scale (:class:`Fp8Weight`).

    ``weight`` keeps the ``nn.Linear`` name and shape ``(out, in)`` (so checkpoint keys are
    unchanged) but holds e4m3 values; ``scale`` (float32, ``(1, out)`` rowwise or ``()``
    tensorwise) is a non-persistent buffer; ``bias`` stays in the model dtype.  The forward is
    :func:`fp8_linear`.

    Args:
        in_features, out_features: the layer's shape (multiples of 16).
        bias: whether it has a bias.
        mode: ``rowwise`` or ``tensorwise`` scaling.
        dtype: the model dtype (of the bias and of the values :meth:`load_` quantizes).
        device: where the layer lives (``meta``: shapes only).

    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool,
        mode: str,
        dtype: torch.dtype,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if mode not in FP8_MODES[1:]:
            raise ValueError(f'fp8 scaling must be one of {FP8_MODES[1:]}, got {mode!r}')
        if out_features % 16 or in_features % 16:
            raise ValueError(
                f'FP8 linears need dimensions that are multiples of 16, got '
                f'{(out_features, in_features)}'
            )
        self.in_features, self.out_features = in_features, out_features
        self.mode = mode
        self.model_dtype = dtype
        empty = torch.empty((out_features, in_features), dtype=FP8_DTYPE, device=device)
        self.weight = nn.Parameter(empty, requires_grad=False)
        self.bias = (
            nn.Parameter(torch.empty(out_features, dtype=dtype, device=device), requires_grad=False)
            if bias
            else None
        )
        scale_shape = (1, out_features) if mode == 'rowwise' else ()
        scale = torch.ones(scale_shape, dtype=torch.float32, device=device)
        self.register_buffer('scale', scale, persistent=False)

    @classmethod
    def like(cls, linear: nn.Linear, mode: str) -> Fp8Linear:
        """An FP8 layer of ``linear``'s shape, device and dtype, holding ``linear``'s values.

        On the ``meta`` device only the shapes are taken.
        """
        weight = linear.weight
        layer = cls(
            linear.in_features,
            linear.out_features,
            linear.bias is not None,
            mode,
            weight.dtype,
            weight.device,
        )
        if weight.device.type != 'meta':
            layer.load_(weight, linear.bias)
        return layer

    @torch.no_grad()
    def load_(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        """Quantize ``weight (out, in)`` (any float dtype and device) into the layer.

        The values are first rounded to the model dtype, so an FP8 model loaded from a
        checkpoint equals one quantized from the model-dtype weights.  ``bias`` too, if given.
        """
        if tuple(weight.shape) != tuple(self.weight.shape):
            raise ValueError(
                f'weight of shape {tuple(weight.shape)} for a {tuple(self.weight.shape)} layer'
            )
        device = self.weight.device
        values = weight.to(device=device, dtype=self.model_dtype)
        quantized = quantize_weight(values, None, self.mode)
        self.weight.copy_(quantized.weight)
        self.scale.copy_(quantized.scale)
        if bias is not None and self.bias is not None:
            self.bias.copy_(bias)

    def as_tuple(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """``(weight, scale, bias)``: plain tensors for compiled code."""
        return self.weight, self.scale, self.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ W.T + bias`` in FP8 (:func:`fp8_linear`)."""
        return fp8_linear(x, self.weight, self.scale, self.bias)

    def extra_repr(self) -> str:
        """Shape and scaling, for ``print(module)``."""
        return (
            f'in_features={self.in_features}, out_features={self.out_features}, '
            f'bias={self.bias is not None}, mode={self.mode}'
        )


@torch.no_grad()
def quantize_linears_(module: nn.Module, mode: str) -> int:
    """Replace every ``nn.Linear`` inside ``module`` by an :class:`Fp8Linear`; return how many.

    The model-dtype weights are released as each layer is replaced (on ``meta``, only the
    shapes are taken).  Layers that are already FP8 are kept; one of another scaling mode is a
    ``ValueError``.
    """
    count = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, Fp8Linear):
                if child.mode != mode:
                    raise ValueError(f'{name} is held in {child.mode} FP8, not {mode}')
            elif isinstance(child, nn.Linear):
                setattr(parent, name, Fp8Linear.like(child, mode))
                count += 1
    return count
