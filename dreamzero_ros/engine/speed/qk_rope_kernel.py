# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""QK RMSNorm, rotary embedding and the K/V cache write of a self-attention in one Triton kernel.

The fused q/k/v product (:mod:`.block_transforms`) gives every token ``[q | k | v]``, each
``heads x head_dim`` wide.  :func:`qk_norm_rope_into_cache` then makes one pass over them, one
program per token and part: q and k get the Wan RMSNorm over all heads (float32 statistics, the
normalised values rounded to the model dtype, times the weight, rounded again) and the rotary
embedding of adjacent pairs (float32, rounded); q goes to a new tensor, k into the K/V cache's
slot; v is copied into its slot.  Those are the operations and roundings of the torch path,
:meth:`.dit_block.SelfAttention.normalize_and_rotate` and the cache write; only the float32 sums run
in another order.  Compiled, the torch path takes two kernels and reads q and k twice.

It is the op ``torch.ops.dreamzero.qk_norm_rope_into_cache`` (a custom op that writes its
``k_out, v_out`` arguments), so a compiled DiT block calls it as one opaque kernel.

Triton is optional: :func:`available` says whether the kernel can run on a device (CUDA, or any
device under ``TRITON_INTERPRET=1``, Triton's CPU interpreter used by the tests).
"""

from __future__ import annotations

import torch

from dreamzero_ros.engine.networks.triton_support import kernel_runs_on, tl, triton

__all__ = ['available', 'qk_norm_rope_into_cache']

#: Triton decides when a kernel is defined (at this import) whether it runs interpreted.


def available(device: torch.device) -> bool:
    """Whether :func:`qk_norm_rope_into_cache` can run on ``device``."""
    return kernel_runs_on(device)


if triton is not None:

    @triton.jit
    def _qk_norm_rope_kernel(
        qkv_ptr,
        weight_q_ptr,
        weight_k_ptr,
        cos_ptr,
        sin_ptr,
        q_ptr,
        k_ptr,
        v_ptr,
        tokens,
        k_stride_b,
        k_stride_l,
        v_stride_b,
        v_stride_l,
        eps,
        dim: tl.constexpr,  # heads * head_dim
        half: tl.constexpr,  # head_dim // 2
        block: tl.constexpr,  # a power of two >= dim // 2
    ):
        row = tl.program_id(0)
        part = tl.program_id(1)  # 0: q, 1: k, 2: v
        b = row // tokens
        position = row % tokens
        offsets = tl.arange(0, 2 * block)
        mask = offsets < dim
        src = qkv_ptr + row * (3 * dim) + part * dim
        if part == 2:
            dst = v_ptr + b * v_stride_b + position * v_stride_l
            tl.store(dst + offsets, tl.load(src + offsets, mask=mask), mask=mask)
        else:
            if part == 0:
                weight_ptr = weight_q_ptr
                dst = q_ptr + row * dim
            else:
                weight_ptr = weight_k_ptr
                dst = k_ptr + b * k_stride_b + position * k_stride_l
            dtype = qkv_ptr.dtype.element_ty
            x = tl.load(src + offsets, mask=mask, other=0.0).to(tl.float32)
            rstd = tl.rsqrt(tl.sum(x * x, axis=0) / dim + eps)
            weight = tl.load(weight_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
            # _rms_norm: normalised in float32, rounded to the model dtype, times the weight.
            x = ((x * rstd).to(dtype).to(tl.float32) * weight).to(dtype).to(tl.float32)
            real, imag = tl.split(tl.reshape(x, (block, 2)))
            pair = tl.arange(0, block)
            angle = position * half + pair % half
            cos = tl.load(cos_ptr + angle, mask=pair < dim // 2, other=0.0)
            sin = tl.load(sin_ptr + angle, mask=pair < dim // 2, other=0.0)
            rotated = tl.join(real * cos - imag * sin, real * sin + imag * cos)
            tl.store(dst + offsets, tl.reshape(rotated, (2 * block,)).to(dtype), mask=mask)

    #: On a GPU the warps per program are measured once per width (rewriting the same values).
    _tuned_kernel = triton.autotune(
        configs=[triton.Config({}, num_warps=warps) for warps in (4, 8, 16)], key=['dim']
    )(_qk_norm_rope_kernel)


@torch.library.custom_op('dreamzero::qk_norm_rope_into_cache', mutates_args=('k_out', 'v_out'))
def qk_norm_rope_into_cache(
    qkv: torch.Tensor,
    weight_q: torch.Tensor,
    weight_k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    heads: int,
    eps: float,
    k_out: torch.Tensor,
    v_out: torch.Tensor,
) -> torch.Tensor:
    """Normalise and rotate q and k of ``qkv (B, L, 3 dim)``; k, v into the cache slots.

    ``cos, sin``: float32 ``(L, head_dim // 2)`` rotation tables; ``k_out, v_out``: the
    ``(B, L, heads, head_dim)`` slots (views of the cache, heads and head_dim contiguous).
    Returns q, ``(B, L, heads, head_dim)``.
    """
    if not available(qkv.device):
        raise RuntimeError(f'the Triton QK kernel cannot run on {qkv.device}')
    batch, tokens, width = qkv.shape
    dim = width // 3
    head_dim = dim // heads
    shape = (batch, tokens, heads, head_dim)
    if not qkv.is_contiguous() or width != 3 * dim or dim != heads * head_dim:
        raise ValueError(f'qkv must be a contiguous (B, L, 3 x heads x head_dim), got {qkv.shape}')
    for name, slot in (('k_out', k_out), ('v_out', v_out)):
        if slot.shape != shape or slot.stride()[2:] != (head_dim, 1) or slot.dtype != qkv.dtype:
            raise ValueError(f'{name} must be a {shape} {qkv.dtype} slot, got {slot.shape}')
    for name, weight in (('weight_q', weight_q), ('weight_k', weight_k)):
        if weight.shape != (dim,) or not weight.is_contiguous():
            raise ValueError(f'{name} must be a contiguous ({dim},), got {weight.shape}')
    if cos.shape != (tokens, head_dim // 2) or sin.shape != cos.shape:
        raise ValueError(f'cos/sin must be ({tokens}, {head_dim // 2}), got {cos.shape}')
    q = qkv.new_empty(shape)
    kernel = _tuned_kernel if qkv.is_cuda else _qk_norm_rope_kernel  # the interpreter: no timing
    kernel[(batch * tokens, 3)](
        qkv,
        weight_q,
        weight_k,
        cos.float().contiguous(),
        sin.float().contiguous(),
        q,
        k_out,
        v_out,
        tokens,
        k_out.stride(0),
        k_out.stride(1),
        v_out.stride(0),
        v_out.stride(1),
        eps,
        dim=dim,
        half=head_dim // 2,
        block=triton.next_power_of_2(dim // 2),
    )
    return q


@qk_norm_rope_into_cache.register_fake
def _(
    qkv: torch.Tensor,
    weight_q: torch.Tensor,
    weight_k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    heads: int,
    eps: float,
    k_out: torch.Tensor,
    v_out: torch.Tensor,
) -> torch.Tensor:
    batch, tokens, width = qkv.shape
    return qkv.new_empty((batch, tokens, heads, width // 3 // heads))
