# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""FP8 self-attention over an FP8 K/V cache: a flash-attention forward in Triton.

A DiT call's self-attention reads the layer's cached keys and values (e4m3 values, one scale per
token and head: :class:`~.kv_cache.Fp8KVCache`) followed by the call's own new keys and values
(model dtype), with no mask -- the reference concatenates ``[cache | new tokens]`` and attends
over all of it; the sliding window is applied by dropping cached tokens, never by masking.
:func:`fp8_kv_attention` computes that attention without a model-dtype copy of the cache:

* each query row is quantized to e4m3 with its own scale (per token and head, in the kernel);
* ``Q K^T`` over the cache runs on FP8 tensor cores; the row scale of Q, the column (token)
  scale of K and the softmax scale are applied to the float32 scores, so the scaling is exact;
* ``P V`` over the cache: the token scales of V multiply the columns of ``P``; then ``P`` in
  bfloat16 multiplies V converted to bfloat16 in registers (default), or (``pv_fp8``) ``P`` is
  quantized to e4m3 against the block's largest value scale and multiplied on FP8 tensor cores;
* the call's new keys and values are attended in the model dtype (default, as the dequantizing
  path attends them), or (``new_fp8``) quantized per token and head in the kernel as the cache
  stores them and multiplied in FP8;
* the online softmax (flash attention) keeps the running maximum and sum in float32.

Measured on an H200 (``benchmarks/micro_fp8_attention.py``) the defaults are the fastest of the
token-major configurations tried and the most exact, yet at about 260 TFLOP/s well below
cuDNN's bf16 kernel (about 540): V in the cache is token-major, and FP8 ``P V`` on Hopper wants
it the other way round.

A second kernel (:class:`KernelConfig` ``transposed_v``) reads V token-contiguous, ``(B, H, D,
Lc)``: the copy :class:`~.kv_cache.Fp8KVCache` keeps under FP8 attention (``v_cached_t``), so
that ``P V`` runs on FP8 tensor cores with both operands as Hopper's FP8 products want them:

* ``P`` (``p <= 1``) times the value scales of the block's tokens is quantized to e4m3 against
  the block's largest scale (``pv_fp8``), or as two e4m3 terms, the second the rounding error
  of the first, 16 times finer (``pv_split``: two FP8 products, about as exact as bf16); the
  product accumulates in the block's units (one scalar carried with the accumulator);
* the call's new tokens are attended first: in the model dtype (default), or quantized once per
  call per token and head, exactly as the cache quantizes them, into FP8 buffers with V
  transposed (``new_fp8``), so that every product is FP8;
* ``tma``: keys and values through TMA descriptors (``tl.make_tensor_descriptor``), else pointer
  loads; ``warp_specialize``: Triton's warp-specialised loops.

The op is registered with torch (``torch.ops.dreamzero.fp8_kv_attention``) with a fake
implementation, so ``torch.compile`` treats it as one opaque call.  Without Triton, or on a
device it cannot run on, the op computes the reference instead: dequantized cache, then torch's
scaled-dot-product attention.  :func:`unsupported` says why a device cannot run the kernel
(Triton missing, no CUDA, or no FP8 tensor cores: compute capability below 8.9).  Under
``TRITON_INTERPRET=1`` the kernel runs on the CPU (tests).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
import os

import torch
import torch.nn.functional as F  # noqa: N812

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: the reference runs instead
    triton = None

__all__ = ['KernelConfig', 'fp8_kv_attention', 'kernel_config', 'unsupported']

_INTERPRETED = os.environ.get('TRITON_INTERPRET') == '1'
#: The first compute capability with FP8 tensor cores (Ada); Hopper is 9.0, Blackwell 10.0+.
FP8_CAPABILITY = (8, 9)


#: ``KernelConfig.new_sdpa``: torch's kernels that attend the new tokens and give the log-sum-exp.
NEW_SDPA = ('cudnn', 'flash')


@dataclass(frozen=True)
class KernelConfig:
    """Kernel, tile sizes and precisions.

    ``pv_fp8``: ``P V`` of the cached tokens on FP8 tensor cores (else bf16); ``new_fp8``: the
    call's new tokens quantized and multiplied in FP8 (else in the model dtype, as the
    dequantizing path attends them).  ``transposed_v``: the kernel that reads V token-contiguous
    (see the module docstring), with its options ``pv_split`` (FP8 ``P V`` in two terms),
    ``tma`` and ``warp_specialize``; else the token-major kernel (the default).
    """

    block_m: int = 128
    block_n: int = 64
    num_warps: int = 8
    num_stages: int = 3
    pv_fp8: bool = False
    new_fp8: bool = False
    transposed_v: bool = False
    pv_split: bool = False
    tma: bool = False
    warp_specialize: bool = False
    exp_fp16: bool = False
    new_sdpa: str = ''

    def __post_init__(self) -> None:
        options = (self.pv_split, self.tma, self.warp_specialize, self.exp_fp16, self.new_sdpa)
        if not self.transposed_v and any(options):
            raise ValueError(
                'pv_split, tma, warp_specialize, exp_fp16 and new_sdpa are options of transposed_v'
            )
        if (self.pv_split or self.exp_fp16) and not self.pv_fp8:
            raise ValueError('pv_split and exp_fp16 are options of an FP8 P V (pv_fp8)')
        if self.new_sdpa not in ('', *NEW_SDPA):
            raise ValueError(f'new_sdpa must be one of {NEW_SDPA} or empty, not {self.new_sdpa!r}')
        if self.new_sdpa and self.new_fp8:
            raise ValueError('new_sdpa attends the new tokens in the model dtype, not new_fp8')

    @property
    def name(self) -> str:
        """A short label: kernel, tiles, warps, stages and precisions."""
        pv = 'fp8x2' if self.pv_split else 'fp8' if self.pv_fp8 else 'bf16'
        new = self.new_sdpa or ('fp8' if self.new_fp8 else 'bf16')
        extras = ''.join(
            f' {flag}'
            for flag, on in (
                ('tma', self.tma),
                ('ws', self.warp_specialize),
                ('exp16', self.exp_fp16),
            )
            if on
        )
        return (
            f'{"vt" if self.transposed_v else "fp8"} {self.block_m}x{self.block_n} '
            f'w{self.num_warps} s{self.num_stages} pv-{pv} new-{new}'
            f'{extras}'
        )


_CONFIG = [KernelConfig()]


def kernel_config(config: KernelConfig | None = None) -> KernelConfig:
    """The kernel's tile configuration; ``config`` replaces it (benchmarks)."""
    if config is not None:
        _CONFIG[0] = config
    return _CONFIG[0]


def unsupported(device: torch.device | str) -> str | None:
    """Why the kernel cannot run on ``device``, or None when it can."""
    device = torch.device(device)
    if device.type == 'meta':  # shapes only (memory estimates): nothing runs
        return None
    if triton is None:
        return 'needs Triton (the triton package), which is not installed'
    if _INTERPRETED:
        return None
    if device.type != 'cuda':
        return f'needs a CUDA GPU with FP8 tensor cores, not the {device.type} device'
    if not torch.cuda.is_available():
        return 'needs a CUDA GPU, and CUDA is not available'
    capability = torch.cuda.get_device_capability(device)
    if capability < FP8_CAPABILITY:
        return (
            'needs FP8 tensor cores (compute capability 8.9 or newer: Ada, Hopper, Blackwell); '
            f'this GPU has {capability[0]}.{capability[1]}'
        )
    return None


if triton is not None:

    @triton.jit
    def _e4m3(x, emulate: tl.constexpr):
        """``x`` (float32, ``|x| <= 448``) rounded to e4m3, to nearest even.

        ``emulate``: the rounded values in float32 (Triton's interpreter converts to FP8
        wrongly: a mantissa that rounds up to the next power of two loses the carry).
        """
        if emulate:
            x = x.to(tl.float32)
            bits = x.to(tl.int32, bitcast=True)
            normal = ((bits + 0x7FFFF + ((bits >> 20) & 1)) & -1048576).to(tl.float32, bitcast=True)
            subnormal = ((x * 512.0 + 12582912.0) - 12582912.0) / 512.0
            return tl.where(tl.abs(x) < 0.015625, subnormal, normal)
        return x.to(tl.float8e4nv)

    @triton.jit
    def _dot(a, b, emulate: tl.constexpr, acc=None):
        """``acc + a @ b`` accumulated in float32 (``emulate``: over float32 operands)."""
        if emulate:
            return tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
        return tl.dot(a, b, acc)

    @triton.jit
    def _load_tile(ptrs, n_mask, d_mask, masked: tl.constexpr, even_d: tl.constexpr):
        """A ``(tokens, head_dim)`` tile: masked where it may reach past either end."""
        if masked:
            return tl.load(ptrs, mask=n_mask[:, None] & d_mask[None, :], other=0.0)
        if even_d:
            return tl.load(ptrs)
        return tl.load(ptrs, mask=d_mask[None, :], other=0.0)

    @triton.jit
    def _attend_block(
        acc,
        m_i,
        l_i,
        q8,
        q_factor,
        q16,
        qk_scale,
        k_ptr,
        v_ptr,
        ks_ptr,
        vs_ptr,
        start,
        count,
        token_stride,
        scale_stride,
        offs_d,
        d_mask,
        quantize_kv: tl.constexpr,
        masked: tl.constexpr,
        even_d: tl.constexpr,
        block_n: tl.constexpr,
        pv_fp8: tl.constexpr,
        new_fp8: tl.constexpr,
        emulate: tl.constexpr,
    ):
        """One block of ``block_n`` keys/values: online-softmax update of ``acc, m_i, l_i``.

        ``masked``: the block may reach past ``count`` (the last one); the others load unmasked.
        """
        offs_n = start + tl.arange(0, block_n)
        n_mask = offs_n < count
        kv_offsets = offs_n[:, None] * token_stride + offs_d[None, :]
        if quantize_kv and not new_fp8:  # the call's new tokens in the model dtype
            k16 = _load_tile(k_ptr + kv_offsets, n_mask, d_mask, masked, even_d)
            v16 = _load_tile(v_ptr + kv_offsets, n_mask, d_mask, masked, even_d)
            s = _dot(q16, tl.trans(k16), emulate) * qk_scale
        else:
            if quantize_kv:  # the call's new tokens: per token and head, as the cache stores them
                k = _load_tile(k_ptr + kv_offsets, n_mask, d_mask, masked, even_d).to(tl.float32)
                v = _load_tile(v_ptr + kv_offsets, n_mask, d_mask, masked, even_d).to(tl.float32)
                k_scale = tl.maximum(tl.max(tl.abs(k), axis=1), 1e-12) / 448.0
                v_scale = tl.maximum(tl.max(tl.abs(v), axis=1), 1e-12) / 448.0
                k8 = _e4m3(k / k_scale[:, None], emulate)
                v8 = _e4m3(v / v_scale[:, None], emulate)
            else:  # the cache: e4m3 values and their scales
                k8 = _load_tile(k_ptr + kv_offsets, n_mask, d_mask, masked, even_d)
                v8 = _load_tile(v_ptr + kv_offsets, n_mask, d_mask, masked, even_d)
                if masked:
                    k_scale = tl.load(ks_ptr + offs_n * scale_stride, mask=n_mask, other=0.0)
                    v_scale = tl.load(vs_ptr + offs_n * scale_stride, mask=n_mask, other=0.0)
                else:
                    k_scale = tl.load(ks_ptr + offs_n * scale_stride)
                    v_scale = tl.load(vs_ptr + offs_n * scale_stride)
                k_scale = k_scale.to(tl.float32)
                v_scale = v_scale.to(tl.float32)
            s = _dot(q8, tl.trans(k8), emulate) * q_factor[:, None] * k_scale[None, :]
        if masked:
            s = tl.where(n_mask[None, :], s, float('-inf'))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None]
        if quantize_kv and not new_fp8:
            acc += _dot(p.to(v16.dtype), v16, emulate)
        elif pv_fp8:
            v_max = tl.maximum(tl.max(v_scale, axis=0), 1e-30)
            p8 = _e4m3(p * (v_scale * (448.0 / v_max))[None, :], emulate)
            acc += _dot(p8, v8, emulate) * (v_max / 448.0)
        else:
            pv = (p * v_scale[None, :]).to(tl.bfloat16)
            acc += _dot(pv, v8.to(tl.bfloat16), emulate)
        return acc, m_new, l_i

    @triton.jit
    def _fp8_attention_kernel(
        q_ptr,
        kc_ptr,
        vc_ptr,
        ks_ptr,
        vs_ptr,
        kn_ptr,
        vn_ptr,
        out_ptr,
        q_len,
        cached,
        new,
        heads,
        q_strides_b,
        q_strides_l,
        q_strides_h,
        c_strides_b,
        c_strides_l,
        c_strides_h,
        s_strides_b,
        s_strides_l,
        s_strides_h,
        n_strides_b,
        n_strides_l,
        n_strides_h,
        o_strides_b,
        o_strides_l,
        o_strides_h,
        qk_scale,
        head_dim: tl.constexpr,
        block_d: tl.constexpr,
        block_m: tl.constexpr,
        block_n: tl.constexpr,
        pv_fp8: tl.constexpr,
        new_fp8: tl.constexpr,
        emulate: tl.constexpr,
    ):
        pid_m = tl.program_id(0)
        row = tl.program_id(1)
        b = row // heads
        h = row % heads
        offs_m = pid_m * block_m + tl.arange(0, block_m)
        offs_d = tl.arange(0, block_d)
        d_mask = offs_d < head_dim
        m_mask = offs_m < q_len
        q_tile = q_ptr + b * q_strides_b + h * q_strides_h
        q16 = tl.load(
            q_tile + offs_m[:, None] * q_strides_l + offs_d[None, :],
            mask=m_mask[:, None] & d_mask[None, :],
            other=0.0,
        )
        q = q16.to(tl.float32)
        q_scale = tl.maximum(tl.max(tl.abs(q), axis=1), 1e-12) / 448.0
        q8 = _e4m3(q / q_scale[:, None], emulate)
        q_factor = q_scale * qk_scale  # qk_scale: softmax scale * log2(e)

        m_i = tl.full([block_m], float('-inf'), tl.float32)
        l_i = tl.zeros([block_m], tl.float32)
        acc = tl.zeros([block_m, block_d], tl.float32)
        kc = kc_ptr + b * c_strides_b + h * c_strides_h
        vc = vc_ptr + b * c_strides_b + h * c_strides_h
        ks = ks_ptr + b * s_strides_b + h * s_strides_h
        vs = vs_ptr + b * s_strides_b + h * s_strides_h
        full = cached - cached % block_n
        for start in range(0, full, block_n):
            acc, m_i, l_i = _attend_block(
                acc, m_i, l_i, q8, q_factor, q16, qk_scale, kc, vc, ks, vs, start, cached,
                c_strides_l, s_strides_l, offs_d, d_mask, False, False,
                head_dim == block_d, block_n, pv_fp8, new_fp8, emulate,
            )  # fmt: skip
        if full < cached:
            acc, m_i, l_i = _attend_block(
                acc, m_i, l_i, q8, q_factor, q16, qk_scale, kc, vc, ks, vs, full, cached,
                c_strides_l, s_strides_l, offs_d, d_mask, False, True,
                head_dim == block_d, block_n, pv_fp8, new_fp8, emulate,
            )  # fmt: skip
        kn = kn_ptr + b * n_strides_b + h * n_strides_h
        vn = vn_ptr + b * n_strides_b + h * n_strides_h
        full = new - new % block_n
        for start in range(0, full, block_n):
            acc, m_i, l_i = _attend_block(
                acc, m_i, l_i, q8, q_factor, q16, qk_scale, kn, vn, ks, vs, start, new,
                n_strides_l, s_strides_l, offs_d, d_mask, True, False,
                head_dim == block_d, block_n, pv_fp8, new_fp8, emulate,
            )  # fmt: skip
        if full < new:
            acc, m_i, l_i = _attend_block(
                acc, m_i, l_i, q8, q_factor, q16, qk_scale, kn, vn, ks, vs, full, new,
                n_strides_l, s_strides_l, offs_d, d_mask, True, True,
                head_dim == block_d, block_n, pv_fp8, new_fp8, emulate,
            )  # fmt: skip
        out = acc / l_i[:, None]
        o_tile = out_ptr + b * o_strides_b + h * o_strides_h
        tl.store(
            o_tile + offs_m[:, None] * o_strides_l + offs_d[None, :],
            out.to(out_ptr.dtype.element_ty),
            mask=m_mask[:, None] & d_mask[None, :],
        )


if triton is not None:

    @triton.jit
    def _quantize_rows_kernel(
        x_ptr,
        values_ptr,
        scale_ptr,
        count,
        heads,
        x_strides_b,
        x_strides_l,
        x_strides_h,
        values_strides_b,
        values_strides_l,
        values_strides_h,
        values_strides_d,
        scale_strides_b,
        scale_strides_l,
        scale_strides_h,
        head_dim: tl.constexpr,
        block_d: tl.constexpr,
        block_t: tl.constexpr,
        emulate: tl.constexpr,
    ):
        """``block_t`` tokens of one head: e4m3 values and a scale per vector, as the cache does.

        The scale ``amax / 448`` is rounded to ``scale_ptr``'s dtype before dividing (as
        :func:`~.kv_cache._quantize_rows`); ``values_strides_*`` place the values token-major or
        transposed (``values_strides_l == 1``: ``(B, H, D, L)``).
        """
        row = tl.program_id(1)
        b = row // heads
        h = row % heads
        offs_t = tl.program_id(0) * block_t + tl.arange(0, block_t)
        offs_d = tl.arange(0, block_d)
        mask = (offs_t < count)[:, None] & (offs_d < head_dim)[None, :]
        x = tl.load(
            x_ptr + b * x_strides_b + h * x_strides_h + offs_t[:, None] * x_strides_l
            + offs_d[None, :],
            mask=mask,
            other=0.0,
        ).to(tl.float32)  # fmt: skip
        amax = tl.maximum(tl.max(tl.abs(x), axis=1), 1e-12)
        scale = amax / 448.0
        if emulate and scale_ptr.dtype.element_ty == tl.bfloat16:
            # to nearest even, in float32 (the interpreter truncates to bfloat16)
            bits = scale.to(tl.int32, bitcast=True)
            scale = ((bits + 0x7FFF + ((bits >> 16) & 1)) & -65536).to(tl.float32, bitcast=True)
        scale = scale.to(scale_ptr.dtype.element_ty)
        values = _e4m3(tl.clamp(x / scale.to(tl.float32)[:, None], -448.0, 448.0), emulate)
        tl.store(
            values_ptr + b * values_strides_b + h * values_strides_h
            + offs_t[:, None] * values_strides_l + offs_d[None, :] * values_strides_d,
            values.to(values_ptr.dtype.element_ty),
            mask=mask,
        )  # fmt: skip
        tl.store(
            scale_ptr + b * scale_strides_b + h * scale_strides_h + offs_t * scale_strides_l,
            scale,
            mask=offs_t < count,
        )

    @triton.jit
    def _exp2(x, half: tl.constexpr, emulate: tl.constexpr):
        """``2 ** x``; ``half``: in float16, two per instruction (``ex2.approx.f16x2``)."""
        if not half:
            out = tl.math.exp2(x)
        elif emulate:  # (the interpreter runs no inline assembly)
            out = tl.math.exp2(x).to(tl.float16)
        else:
            out = tl.inline_asm_elementwise(
                'ex2.approx.f16x2 $0, $1;', '=r,r', [x.to(tl.float16)],
                dtype=tl.float16, is_pure=True, pack=2,
            )  # fmt: skip
        return out

    @triton.jit
    def _tokens_tile(
        src, start, count, token_stride, offs_d, d_mask,
        masked: tl.constexpr, block_n: tl.constexpr, tma: tl.constexpr, even_d: tl.constexpr,
    ):  # fmt: skip
        """``(block_n, head_dim)``: tokens ``start...`` of a token-major operand."""
        if tma:  # (a descriptor: the rows past its end read as zeros)
            tile = src.load([start, 0])
        else:
            offs_n = start + tl.arange(0, block_n)
            ptrs = src + offs_n[:, None] * token_stride + offs_d[None, :]
            if masked:
                tile = tl.load(ptrs, mask=(offs_n < count)[:, None] & d_mask[None, :], other=0.0)
            elif even_d:
                tile = tl.load(ptrs)
            else:
                tile = tl.load(ptrs, mask=d_mask[None, :], other=0.0)
        return tile

    @triton.jit
    def _channels_tile(
        src, start, count, channel_stride, offs_d, d_mask,
        masked: tl.constexpr, block_n: tl.constexpr, tma: tl.constexpr, even_d: tl.constexpr,
    ):  # fmt: skip
        """``(head_dim, block_n)``: tokens ``start...`` of a transposed (token-contiguous) V."""
        if tma:
            tile = src.load([0, start])
        else:
            offs_n = start + tl.arange(0, block_n)
            ptrs = src + offs_d[:, None] * channel_stride + offs_n[None, :]
            if masked:
                tile = tl.load(ptrs, mask=d_mask[:, None] & (offs_n < count)[None, :], other=0.0)
            elif even_d:
                tile = tl.load(ptrs)
            else:
                tile = tl.load(ptrs, mask=d_mask[:, None], other=0.0)
        return tile

    @triton.jit
    def _vt_block(
        acc, m_i, l_i, unit, q, q_factor, k_src, v_src, ks, vs,
        start, count, k_stride, v_stride, scale_stride, offs_d, d_mask,
        fp8: tl.constexpr, masked: tl.constexpr, block_n: tl.constexpr, pv_fp8: tl.constexpr,
        pv_split: tl.constexpr, tma: tl.constexpr, even_d: tl.constexpr,
        exp_fp16: tl.constexpr, emulate: tl.constexpr,
    ):  # fmt: skip
        """One block of keys/values: the online-softmax update of ``acc, m_i, l_i, unit``.

        The output so far is ``acc * unit / l_i`` (``unit``: a float32 scalar).

        ``fp8``: e4m3 keys ``(tokens, D)`` and transposed values ``(D, tokens)`` with a scale
        per token (``q`` the e4m3 queries, ``q_factor`` their row scales times the softmax
        scale); else model-dtype keys and values ``(tokens, D)`` (``q`` in the model dtype,
        ``q_factor`` the softmax scale).  ``masked``: the block may reach past ``count``.
        """
        offs_n = start + tl.arange(0, block_n)
        n_mask = offs_n < count
        k = _tokens_tile(
            k_src, start, count, k_stride, offs_d, d_mask, masked, block_n, tma, even_d
        )
        if fp8:
            if masked:
                k_scale = tl.load(ks + offs_n * scale_stride, mask=n_mask, other=0.0)
                v_scale = tl.load(vs + offs_n * scale_stride, mask=n_mask, other=0.0)
            else:
                k_scale = tl.load(ks + offs_n * scale_stride)
                v_scale = tl.load(vs + offs_n * scale_stride)
            s = _dot(q, tl.trans(k), emulate) * k_scale.to(tl.float32)[None, :]
            v_scale = v_scale.to(tl.float32)
        else:
            s = _dot(q, tl.trans(k), emulate)
        if masked:
            s = tl.where(n_mask[None, :], s, float('-inf'))
        # q_factor > 0: the maximum of the scaled row is the scaled maximum
        m_new = tl.maximum(m_i, tl.max(s, axis=1) * q_factor)
        # exp_fp16: P rounded to e4m3 next, 2 ** x in float16 is exact enough and twice as fast
        p = _exp2(s * q_factor[:, None] - m_new[:, None], fp8 and exp_fp16, emulate)
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p.to(tl.float32), axis=1)
        if not fp8:
            v = _tokens_tile(
                v_src, start, count, v_stride, offs_d, d_mask, masked, block_n, tma, even_d
            )
            acc = _dot(p.to(v.dtype), v, emulate, acc * (alpha * unit)[:, None])
            unit = 1.0
        else:
            vt = _channels_tile(
                v_src, start, count, v_stride, offs_d, d_mask, masked, block_n, tma, even_d
            )
            if pv_fp8:
                # p <= 1: p * v_scale / max(v_scale) * 448 fills e4m3's range; the product
                # accumulates onto acc in units of max(v_scale) / 448 (no second accumulator)
                block_unit = tl.maximum(tl.max(v_scale, axis=0), 1e-30) / 448.0
                pv = p * (v_scale / block_unit).to(p.dtype)[None, :]
                p8 = _e4m3(pv, emulate)
                acc = _dot(p8, tl.trans(vt), emulate, acc * (alpha * (unit / block_unit))[:, None])
                unit = block_unit
                if pv_split:  # the rounding error of P as a second e4m3 term, 16 x finer
                    rest = _e4m3((pv - p8.to(pv.dtype)) * 16.0, emulate)
                    acc = _dot(rest, tl.trans(vt), emulate, acc * 16.0)
                    unit = block_unit * 0.0625
            else:
                pv = (p * v_scale[None, :]).to(tl.bfloat16)
                acc = _dot(pv, tl.trans(vt).to(tl.bfloat16), emulate, acc * (alpha * unit)[:, None])
                unit = 1.0
        return acc, m_new, l_i, unit

    @triton.jit
    def _vt_loop(
        acc, m_i, l_i, unit, q, q_factor, k_ptr, v_ptr, ks, vs, count,
        k_stride, v_stride, scale_stride, offs_d, d_mask,
        fp8: tl.constexpr, block_n: tl.constexpr, block_d: tl.constexpr, pv_fp8: tl.constexpr,
        pv_split: tl.constexpr, tma: tl.constexpr, warp_specialize: tl.constexpr,
        even_d: tl.constexpr, exp_fp16: tl.constexpr, emulate: tl.constexpr,
    ):  # fmt: skip
        """Every key/value block of one source (the cache, or the call's new tokens)."""
        if tma:  # descriptors of this batch row and head (of one row at least: none is read)
            rows = tl.maximum(count, 1)
            k_src = tl.make_tensor_descriptor(
                k_ptr, [rows, block_d], [k_stride, 1], [block_n, block_d]
            )
            if fp8:  # V transposed: (head_dim, tokens)
                v_src = tl.make_tensor_descriptor(
                    v_ptr, [block_d, rows], [v_stride, 1], [block_d, block_n]
                )
            else:
                v_src = tl.make_tensor_descriptor(
                    v_ptr, [rows, block_d], [v_stride, 1], [block_n, block_d]
                )
        else:
            k_src = k_ptr
            v_src = v_ptr
        full = count - count % block_n
        for start in tl.range(0, full, block_n, warp_specialize=warp_specialize):
            acc, m_i, l_i, unit = _vt_block(
                acc, m_i, l_i, unit, q, q_factor, k_src, v_src, ks, vs, start, count,
                k_stride, v_stride, scale_stride, offs_d, d_mask,
                fp8, False, block_n, pv_fp8, pv_split, tma, even_d, exp_fp16, emulate,
            )  # fmt: skip
        if full < count:
            acc, m_i, l_i, unit = _vt_block(
                acc, m_i, l_i, unit, q, q_factor, k_src, v_src, ks, vs, full, count,
                k_stride, v_stride, scale_stride, offs_d, d_mask,
                fp8, True, block_n, pv_fp8, pv_split, tma, even_d, exp_fp16, emulate,
            )  # fmt: skip
        return acc, m_i, l_i, unit

    @triton.jit
    def _vt_attention_kernel(
        q_ptr, kc_ptr, vtc_ptr, ks_ptr, vs_ptr, kn_ptr, vn_ptr, ksn_ptr, vsn_ptr, out_ptr,
        init_ptr, lse_ptr, q_len, cached, new, heads,
        q_strides_b, q_strides_l, q_strides_h,
        c_strides_b, c_strides_l, c_strides_h,
        vt_strides_b, vt_strides_h, vt_strides_d,
        s_strides_b, s_strides_l, s_strides_h,
        kn_strides_b, kn_strides_l, kn_strides_h,
        vn_strides_b, vn_strides_1, vn_strides_2,
        sn_strides_b, sn_strides_l, sn_strides_h,
        o_strides_b, o_strides_l, o_strides_h,
        init_strides_b, init_strides_l, init_strides_h,
        lse_strides_b, lse_strides_h,
        qk_scale,
        head_dim: tl.constexpr, block_d: tl.constexpr, block_m: tl.constexpr,
        block_n: tl.constexpr, pv_fp8: tl.constexpr, pv_split: tl.constexpr,
        new_fp8: tl.constexpr, tma: tl.constexpr, warp_specialize: tl.constexpr,
        exp_fp16: tl.constexpr, has_init: tl.constexpr, emulate: tl.constexpr,
    ):  # fmt: skip
        """Attention over the cache (e4m3 K, transposed e4m3 V) and the call's new tokens.

        The new tokens are e4m3 like the cache (``new_fp8``: quantized before the launch, V
        transposed: ``vn_strides_1, vn_strides_2`` are its head and channel strides) or in the
        model dtype (``vn`` token-major: its token and head strides); they are attended first,
        so that the model-dtype queries are dead before the cache's loop.  ``has_init``: they
        were attended already (``init (B, Lq, H, D)``, the output over them, and ``lse (B, H,
        Lq)``, its natural log-sum-exp of the scaled scores): the kernel goes on from there.
        """
        pid_m = tl.program_id(0)
        row = tl.program_id(1)
        b = row // heads
        h = row % heads
        offs_m = pid_m * block_m + tl.arange(0, block_m)
        offs_d = tl.arange(0, block_d)
        d_mask = offs_d < head_dim
        m_mask = offs_m < q_len
        q16 = tl.load(
            q_ptr + b * q_strides_b + h * q_strides_h + offs_m[:, None] * q_strides_l
            + offs_d[None, :],
            mask=m_mask[:, None] & d_mask[None, :],
            other=0.0,
        )  # fmt: skip
        if has_init:  # the softmax state of the new tokens' output: m = its lse, l = 1
            acc = tl.load(
                init_ptr + b * init_strides_b + h * init_strides_h
                + offs_m[:, None] * init_strides_l
                + offs_d[None, :],
                mask=m_mask[:, None] & d_mask[None, :],
                other=0.0,
            ).to(tl.float32)  # fmt: skip
            lse = tl.load(
                lse_ptr + b * lse_strides_b + h * lse_strides_h + offs_m, mask=m_mask, other=0.0
            )
            m_i = lse * 1.4426950408889634  # in log2 units, as the scores
            l_i = tl.full([block_m], 1.0, tl.float32)
        else:
            m_i = tl.full([block_m], float('-inf'), tl.float32)
            l_i = tl.zeros([block_m], tl.float32)
            acc = tl.zeros([block_m, block_d], tl.float32)
        unit = 1.0
        kn = kn_ptr + b * kn_strides_b + h * kn_strides_h
        if not new_fp8 and not has_init:  # the model-dtype queries are dead after this loop
            acc, m_i, l_i, unit = _vt_loop(
                acc, m_i, l_i, unit, q16, tl.full([block_m], qk_scale, tl.float32), kn,
                vn_ptr + b * vn_strides_b + h * vn_strides_2, ksn_ptr, vsn_ptr, new,
                kn_strides_l, vn_strides_1, sn_strides_l, offs_d, d_mask,
                False, block_n, block_d, pv_fp8, pv_split, tma, warp_specialize,
                head_dim == block_d, exp_fp16, emulate,
            )  # fmt: skip
        q = q16.to(tl.float32)
        q_scale = tl.maximum(tl.max(tl.abs(q), axis=1), 1e-12) / 448.0
        q8 = _e4m3(q / q_scale[:, None], emulate)
        q_factor = q_scale * qk_scale  # qk_scale: softmax scale * log2(e)
        if new_fp8:
            acc, m_i, l_i, unit = _vt_loop(
                acc, m_i, l_i, unit, q8, q_factor, kn,
                vn_ptr + b * vn_strides_b + h * vn_strides_1,
                ksn_ptr + b * sn_strides_b + h * sn_strides_h,
                vsn_ptr + b * sn_strides_b + h * sn_strides_h, new,
                kn_strides_l, vn_strides_2, sn_strides_l, offs_d, d_mask,
                True, block_n, block_d, pv_fp8, pv_split, tma, warp_specialize,
                head_dim == block_d, exp_fp16, emulate,
            )  # fmt: skip
        # (no runtime branch around the loops: their shared memory can then be reused)
        acc, m_i, l_i, unit = _vt_loop(
            acc, m_i, l_i, unit, q8, q_factor,
            kc_ptr + b * c_strides_b + h * c_strides_h,
            vtc_ptr + b * vt_strides_b + h * vt_strides_h,
            ks_ptr + b * s_strides_b + h * s_strides_h,
            vs_ptr + b * s_strides_b + h * s_strides_h, cached,
            c_strides_l, vt_strides_d, s_strides_l, offs_d, d_mask,
            True, block_n, block_d, pv_fp8, pv_split, tma, warp_specialize,
            head_dim == block_d, exp_fp16, emulate,
        )  # fmt: skip
        out = acc * (unit / l_i)[:, None]
        tl.store(
            out_ptr + b * o_strides_b + h * o_strides_h + offs_m[:, None] * o_strides_l
            + offs_d[None, :],
            out.to(out_ptr.dtype.element_ty),
            mask=m_mask[:, None] & d_mask[None, :],
        )  # fmt: skip


def _reference(
    q: torch.Tensor,
    k_cached: torch.Tensor,
    v_cached: torch.Tensor,
    k_scale: torch.Tensor,
    v_scale: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
) -> torch.Tensor:
    """What the kernel approximates: the dequantized cache and the new tokens, torch's SDPA."""
    k = torch.cat([(k_cached.float() * k_scale.float()).to(q.dtype), k_new], dim=1)
    v = torch.cat([(v_cached.float() * v_scale.float()).to(q.dtype), v_new], dim=1)
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    return out.transpose(1, 2)


def _launch(
    q: torch.Tensor,
    k_cached: torch.Tensor,
    v_cached: torch.Tensor,
    k_scale: torch.Tensor,
    v_scale: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    out: torch.Tensor,
) -> None:
    batch, q_len, heads, head_dim = q.shape
    config = kernel_config()
    grid = (triton.cdiv(q_len, config.block_m), batch * heads)
    _fp8_attention_kernel[grid](
        q, k_cached, v_cached, k_scale, v_scale, k_new, v_new, out,
        q_len, k_cached.shape[1], k_new.shape[1], heads,
        *q.stride()[:3], *k_cached.stride()[:3], *k_scale.stride()[:3],
        *k_new.stride()[:3], *out.stride()[:3],
        head_dim**-0.5 * 1.4426950408889634,
        head_dim=head_dim,
        block_d=triton.next_power_of_2(max(head_dim, 32)),
        block_m=config.block_m,
        block_n=config.block_n,
        pv_fp8=config.pv_fp8,
        new_fp8=config.new_fp8,
        emulate=_INTERPRETED,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
    )  # fmt: skip


#: Tokens per program of the new tokens' quantization.
_QUANTIZE_TOKENS = 64


def transposed_tokens(tokens: int) -> int:
    """Token capacity of a transposed e4m3 V buffer: a multiple of 16 (bytes, for TMA)."""
    return -(-tokens // 16) * 16


def transposed_v(v: torch.Tensor) -> torch.Tensor:
    """``v (B, L, H, D)`` as a token-contiguous copy ``(B, H, D, L)`` (the op without one)."""
    batch, tokens, heads, head_dim = v.shape
    buffer = v.new_empty((batch, heads, head_dim, transposed_tokens(tokens)))
    out = buffer[..., :tokens]
    out.copy_(v.permute(0, 2, 3, 1))
    return out


def _quantized(x: torch.Tensor, transposed: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``x (B, N, H, D)`` as e4m3 values and a scale per vector in ``x``'s dtype (as the cache).

    ``transposed``: the values token-contiguous, ``(B, H, D, N)``.
    """
    batch, tokens, heads, head_dim = x.shape
    if transposed:
        values = x.new_empty(
            (batch, heads, head_dim, transposed_tokens(tokens)), dtype=torch.float8_e4m3fn
        )[..., :tokens]
        values_strides = (values.stride(0), 1, values.stride(1), values.stride(2))
    else:
        values = x.new_empty(x.shape, dtype=torch.float8_e4m3fn)
        values_strides = values.stride()
    scale = x.new_empty((batch, tokens, heads, 1))
    grid = (triton.cdiv(tokens, _QUANTIZE_TOKENS), batch * heads)
    _quantize_rows_kernel[grid](
        x, values, scale, tokens, heads, *x.stride()[:3], *values_strides, *scale.stride()[:3],
        head_dim=head_dim,
        block_d=triton.next_power_of_2(max(head_dim, 16)),
        block_t=_QUANTIZE_TOKENS,
        emulate=_INTERPRETED,
    )  # fmt: skip
    return values, scale


def _attend_new(
    q: torch.Tensor, k_new: torch.Tensor, v_new: torch.Tensor, kernel: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(out (B, Lq, H, D), lse (B, H, Lq) float32)``: attention over the new tokens alone.

    ``kernel``: torch's cuDNN or flash kernel (``NEW_SDPA``), each with its natural log-sum-exp
    of the scaled scores; on the CPU (the interpreter) the same in float32.
    """
    batch, q_len, heads, head_dim = q.shape
    if q.device.type != 'cuda':
        scores = torch.einsum('bqhd,bkhd->bhqk', q.float(), k_new.float()) * head_dim**-0.5
        out = torch.einsum('bhqk,bkhd->bqhd', scores.softmax(-1), v_new.float())
        return out.to(q.dtype), scores.logsumexp(-1)
    operands = (q.transpose(1, 2), k_new.transpose(1, 2), v_new.transpose(1, 2))
    if kernel == 'cudnn':
        result = torch.ops.aten._scaled_dot_product_cudnn_attention(*operands, None, True)
    else:
        result = torch.ops.aten._scaled_dot_product_flash_attention(*operands)
    return result[0].transpose(1, 2), result[1].reshape(batch, heads, q_len).contiguous()


def _tma_scratch(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    """Global memory for the kernel's TMA descriptors (Triton asks for it per launch)."""
    return torch.empty(size, dtype=torch.int8, device='cuda')


def _tma_fits(*operands: torch.Tensor) -> bool:
    """Whether TMA can read each operand's rows: start and strides 16-byte aligned."""
    return all(
        t.data_ptr() % 16 == 0 and all(s * t.element_size() % 16 == 0 for s in t.stride()[:-1])
        for t in operands
    )


def _launch_vt(
    q: torch.Tensor,
    k_cached: torch.Tensor,
    v_cached_t: torch.Tensor,
    k_scale: torch.Tensor,
    v_scale: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    out: torch.Tensor,
    config: KernelConfig,
) -> None:
    """The transposed-V kernel (:class:`KernelConfig` ``transposed_v``)."""
    batch, q_len, heads, head_dim = q.shape
    block_d = triton.next_power_of_2(max(head_dim, 32))
    if (config.new_fp8 or config.new_sdpa) and not k_new.shape[1]:  # no new tokens
        config = dataclasses.replace(config, new_fp8=False, new_sdpa='')
    init, lse = out, k_scale  # not read
    if config.new_sdpa:
        init, lse = _attend_new(q, k_new, v_new, config.new_sdpa)
    if config.new_fp8:
        k_new, k_new_scale = _quantized(k_new, transposed=False)
        v_new, v_new_scale = _quantized(v_new, transposed=True)
    else:
        k_new_scale = v_new_scale = k_scale  # not read
    tma = config.tma and head_dim == block_d and _tma_fits(k_cached, v_cached_t, k_new, v_new)
    if tma and not _INTERPRETED:
        triton.set_allocator(_tma_scratch)
    grid = (triton.cdiv(q_len, config.block_m), batch * heads)
    _vt_attention_kernel[grid](
        q, k_cached, v_cached_t, k_scale, v_scale, k_new, v_new, k_new_scale, v_new_scale, out,
        init, lse, q_len, k_cached.shape[1], 0 if config.new_sdpa else k_new.shape[1], heads,
        *q.stride()[:3], *k_cached.stride()[:3], *v_cached_t.stride()[:3],
        *k_scale.stride()[:3], *k_new.stride()[:3], *v_new.stride()[:3],
        *k_new_scale.stride()[:3], *out.stride()[:3], *init.stride()[:3], *lse.stride()[:2],
        head_dim**-0.5 * 1.4426950408889634,
        head_dim=head_dim,
        block_d=block_d,
        block_m=config.block_m,
        block_n=config.block_n,
        pv_fp8=config.pv_fp8,
        pv_split=config.pv_split,
        new_fp8=config.new_fp8,
        tma=tma,
        warp_specialize=config.warp_specialize,
        exp_fp16=config.exp_fp16,
        has_init=bool(config.new_sdpa),
        emulate=_INTERPRETED,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
    )  # fmt: skip


def _kernel_takes(q: torch.Tensor, *keys_values: torch.Tensor) -> bool:
    """Whether the kernel runs on these operands.

    A device it supports, 16-bit queries, unit last strides (the scales, one element per
    vector, are read by their other strides).
    """
    return (
        unsupported(q.device) is None
        and q.dtype in (torch.bfloat16, torch.float16)
        and all(t.stride(-1) == 1 for t in (q, *keys_values))
    )


@torch.library.custom_op('dreamzero::fp8_kv_attention', mutates_args=())
def fp8_kv_attention(
    q: torch.Tensor,
    k_cached: torch.Tensor,
    v_cached: torch.Tensor,
    k_scale: torch.Tensor,
    v_scale: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    v_cached_t: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention of ``q`` over ``[cached | new]`` keys/values; returns ``(B, Lq, H, D)``.

    ``q, k_new, v_new (B, L, H, D)`` in the model dtype; ``k_cached, v_cached (B, Lc, H, D)``
    e4m3 with ``k_scale, v_scale (B, Lc, H, 1)`` (the value read is ``value * scale``);
    ``v_cached_t (B, H, D, Lc)``: the same values token-contiguous, which the ``transposed_v``
    kernel reads (without it that kernel transposes a copy per call).  Unmasked; softmax scale
    ``D ** -0.5``.  Slices of the cache's buffers are read in place.
    """
    operands = (q, k_cached, v_cached, k_scale, v_scale, k_new, v_new)
    config = kernel_config()
    if config.transposed_v and v_cached_t is None:
        v_cached_t = transposed_v(v_cached)
    values = (v_cached_t,) if config.transposed_v else (v_cached,)
    if not _kernel_takes(q, k_cached, *values, k_new, v_new):
        return _reference(*operands).contiguous()
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    if not q.shape[1]:
        return out
    if config.transposed_v:
        _launch_vt(q, k_cached, v_cached_t, k_scale, v_scale, k_new, v_new, out, config)
    else:
        _launch(*operands, out)
    return out


@fp8_kv_attention.register_fake
def _(
    q: torch.Tensor,
    k_cached: torch.Tensor,
    v_cached: torch.Tensor,
    k_scale: torch.Tensor,
    v_scale: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    v_cached_t: torch.Tensor | None = None,
) -> torch.Tensor:
    return q.new_empty(q.shape)
