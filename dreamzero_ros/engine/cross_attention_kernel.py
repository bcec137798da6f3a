# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The DiT's two cross-attentions (text and CLIP image) and their sum in one Triton kernel.

Every block attends its queries over the 512 text tokens and, separately, over the 257 image
tokens, and adds the two outputs (:meth:`.dit.CrossAttention`).  Keys this short leave a fused
attention kernel mostly in its prologue and epilogue: each of the two calls loads the query
tile, runs 3-4 key tiles and writes its output, and a third kernel adds them.
:func:`text_image_attention` loads each query tile once, runs the text and image softmaxes
one after the other (flash-attention style, float32 statistics and accumulators, probabilities
rounded to the input dtype for the second product as cuDNN and flash do), adds the two
normalised outputs in float32 and writes the sum once, rounded.
"""

from __future__ import annotations

import torch

from .triton_support import INTERPRETED, available, tl, triton

__all__ = ['text_image_attention', 'tuned_config']

#: Tile sizes the interpreter runs (small: it executes every program in Python).
_INTERPRETER_BLOCKS = {'block_m': 16, 'block_n': 16}


if triton is not None:

    @triton.jit
    def _attend(
        q,
        k_ptr,
        v_ptr,
        stride_b,
        stride_l,
        stride_h,
        b,
        h,
        qk_scale,
        length: tl.constexpr,
        head_dim: tl.constexpr,
        block_m: tl.constexpr,
        block_n: tl.constexpr,
    ):
        """Softmax attention of the query tile ``q`` over ``length`` keys: normalised output."""
        dims = tl.arange(0, head_dim)
        keys = tl.arange(0, block_n)
        base = b * stride_b + h * stride_h
        m_i = tl.full([block_m], float('-inf'), tl.float32)
        l_i = tl.zeros([block_m], tl.float32)
        acc = tl.zeros([block_m, head_dim], tl.float32)
        for start in range(0, length, block_n):
            index = start + keys
            valid = index < length
            offsets = base + index[:, None] * stride_l + dims[None, :]
            k = tl.load(k_ptr + offsets, mask=valid[:, None], other=0.0)
            scores = tl.dot(q, tl.trans(k)) * qk_scale
            scores = tl.where(valid[None, :], scores, float('-inf'))
            m_new = tl.maximum(m_i, tl.max(scores, axis=1))
            p = tl.exp2(scores - m_new[:, None])
            alpha = tl.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, axis=1)
            v = tl.load(v_ptr + offsets, mask=valid[:, None], other=0.0)
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
            m_i = m_new
        return acc / l_i[:, None]

    @triton.jit
    def _text_image_kernel(
        q_ptr,
        k_text_ptr,
        v_text_ptr,
        k_image_ptr,
        v_image_ptr,
        out_ptr,
        heads,
        q_len,
        q_stride_b,
        q_stride_l,
        q_stride_h,
        text_stride_b,
        text_stride_l,
        text_stride_h,
        image_stride_b,
        image_stride_l,
        image_stride_h,
        out_stride_b,
        out_stride_l,
        out_stride_h,
        qk_scale,
        text_len: tl.constexpr,
        image_len: tl.constexpr,
        head_dim: tl.constexpr,
        block_m: tl.constexpr,
        block_n: tl.constexpr,
    ):
        rows = tl.program_id(0) * block_m + tl.arange(0, block_m)
        b = tl.program_id(1) // heads
        h = tl.program_id(1) % heads
        dims = tl.arange(0, head_dim)
        in_range = rows[:, None] < q_len
        q_offsets = b * q_stride_b + h * q_stride_h + rows[:, None] * q_stride_l + dims[None, :]
        q = tl.load(q_ptr + q_offsets, mask=in_range, other=0.0)
        text = _attend(
            q, k_text_ptr, v_text_ptr, text_stride_b, text_stride_l, text_stride_h,
            b, h, qk_scale, text_len, head_dim, block_m, block_n,
        )  # fmt: skip
        image = _attend(
            q, k_image_ptr, v_image_ptr, image_stride_b, image_stride_l, image_stride_h,
            b, h, qk_scale, image_len, head_dim, block_m, block_n,
        )  # fmt: skip
        out_offsets = (
            b * out_stride_b + h * out_stride_h + rows[:, None] * out_stride_l + dims[None, :]
        )
        tl.store(out_ptr + out_offsets, (text + image).to(q.dtype), mask=in_range)

    #: On a GPU the tile sizes, warps and pipeline stages are measured once per shape.
    _tuned_kernel = triton.autotune(
        configs=[
            triton.Config({'block_m': m, 'block_n': n}, num_warps=w, num_stages=s)
            for m, n, w, s in (
                (128, 64, 8, 3),
                (128, 128, 8, 2),
                (128, 64, 4, 3),
                (64, 64, 4, 3),
                (64, 128, 4, 2),
                (128, 32, 4, 4),
            )
        ],
        key=['q_len', 'text_len', 'image_len', 'head_dim'],
    )(_text_image_kernel)


def tuned_config() -> str | None:
    """The tile sizes, warps and stages the GPU autotuning last picked (None before a GPU call)."""
    if triton is None:
        return None
    best = getattr(_tuned_kernel, 'best_config', None)
    return None if best is None else str(best)


def _strides(name: str, x: torch.Tensor, batch: int, heads: int, head_dim: int) -> tuple:
    if x.ndim != 4 or x.shape[0] != batch or x.shape[2:] != (heads, head_dim):
        raise ValueError(f'{name} must be (B={batch}, L, {heads}, {head_dim}), got {x.shape}')
    if x.stride(3) != 1:
        raise ValueError(f'{name} must have a contiguous last dimension')
    return x.stride(0), x.stride(1), x.stride(2)


def text_image_attention(
    q: torch.Tensor,
    k_text: torch.Tensor,
    v_text: torch.Tensor,
    k_image: torch.Tensor,
    v_image: torch.Tensor,
) -> torch.Tensor:
    """``sdpa(q, k_text, v_text) + sdpa(q, k_image, v_image)`` in one kernel, ``(B, Lq, H, D)``.

    All ``(B, L, H, D)`` with a contiguous last dimension (views of the cached context are
    fine); keys and values of a context share their strides.  Softmax scale ``D ** -0.5``.
    """
    if not available(q.device):
        raise RuntimeError(f'the Triton cross-attention kernel cannot run on {q.device}')
    batch, q_len, heads, head_dim = q.shape
    q_strides = _strides('q', q, batch, heads, head_dim)
    text_strides = _strides('k_text', k_text, batch, heads, head_dim)
    image_strides = _strides('k_image', k_image, batch, heads, head_dim)
    if v_text.shape != k_text.shape or v_text.stride() != k_text.stride():
        raise ValueError('v_text must have the shape and strides of k_text')
    if v_image.shape != k_image.shape or v_image.stride() != k_image.stride():
        raise ValueError('v_image must have the shape and strides of k_image')
    if head_dim < 16 or head_dim & (head_dim - 1):
        raise ValueError(f'head_dim must be a power of two >= 16, got {head_dim}')
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    args = (
        q, k_text, v_text, k_image, v_image, out,
        heads, q_len, *q_strides, *text_strides, *image_strides, *out.stride()[:3],
        head_dim**-0.5 * 1.4426950408889634,  # exp2 instead of exp
    )  # fmt: skip
    lengths = {'text_len': k_text.shape[1], 'image_len': k_image.shape[1], 'head_dim': head_dim}
    if q.is_cuda and not INTERPRETED:
        grid = lambda meta: (triton.cdiv(q_len, meta['block_m']), batch * heads)  # noqa: E731
        _tuned_kernel[grid](*args, **lengths)
    else:
        grid = (triton.cdiv(q_len, _INTERPRETER_BLOCKS['block_m']), batch * heads)
        _text_image_kernel[grid](*args, **lengths, **_INTERPRETER_BLOCKS)
    return out
