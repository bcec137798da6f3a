# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Dequantizing an FP8 K/V cache layer into the model dtype in one pass (Triton).

:class:`~.kv_cache.Fp8KVCache` reads each layer's cached keys and values once per DiT call:
e4m3 values with one scale per token and head, written as ``value * scale`` in the model dtype
into its working buffer.  In torch that is a cast, then a multiply over the cast copy (two
passes and a temporary); :func:`dequantize_into` reads one byte and writes two per value.  The
product of two bf16 numbers is exact in float32 and rounded once, as in torch; a product that
falls exactly between two bf16 values may round to the other one.

Triton is optional: :func:`available` says whether the kernel can run on a device (CUDA, or any
device under ``TRITON_INTERPRET=1``); elsewhere :func:`dequantize_into` runs the torch ops.
"""

from __future__ import annotations

import torch

from dreamzero_ros.engine.networks.triton_support import kernel_runs_on, tl, triton

__all__ = ['available', 'dequantize_into']

_BLOCK = 4096


def available(device: torch.device) -> bool:
    """Whether the Triton kernel can run on ``device``."""
    return kernel_runs_on(device)


if triton is not None:

    @triton.jit
    def _dequantize_kernel(
        values_ptr,
        scale_ptr,
        out_ptr,
        count,
        values_stride,
        scale_stride,
        out_stride,
        head_dim: tl.constexpr,
        block: tl.constexpr,
    ):
        row = tl.program_id(0)
        offsets = tl.program_id(1) * block + tl.arange(0, block)
        mask = offsets < count
        values = tl.load(values_ptr + row * values_stride + offsets, mask=mask, other=0.0)
        scale = tl.load(scale_ptr + row * scale_stride + offsets // head_dim, mask=mask, other=0.0)
        out = values.to(tl.float32) * scale.to(tl.float32)
        tl.store(out_ptr + row * out_stride + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def _rows_contiguous(tensor: torch.Tensor) -> bool:
    """Whether each batch row of ``(B, N, H, D)`` is one contiguous run of ``N * H * D``."""
    _, tokens, heads, dim = tensor.shape
    return tensor.stride()[1:] == (heads * dim, dim, 1) or tokens == 0


def dequantize_into(values: torch.Tensor, scale: torch.Tensor, out: torch.Tensor) -> None:
    """``out = values * scale`` in ``out``'s dtype.

    ``values (B, N, H, D)`` e4m3, ``scale (B, N, H, 1)``, ``out (B, N, H, D)``; each batch row
    contiguous (slices of the cache along ``N``).
    """
    batch, tokens, heads, dim = values.shape
    if not (
        available(values.device)
        and all(_rows_contiguous(t) for t in (values, out))
        and scale.stride()[1:] == (heads, 1, 1)
    ):
        torch.mul(values.to(out.dtype), scale, out=out)
        return
    count = tokens * heads * dim
    if not count:
        return
    grid = (batch, triton.cdiv(count, _BLOCK))
    _dequantize_kernel[grid](
        values,
        scale,
        out,
        count,
        values.stride(0),
        scale.stride(0),
        out.stride(0),
        head_dim=dim,
        block=_BLOCK,
    )
