# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Runs the FP8 attention kernel under Triton's CPU interpreter; prints its checks as JSON.

Started by ``test_engine_fp8_attention.py`` with ``TRITON_INTERPRET=1`` (Triton reads it when the
kernel is defined, so it must be set before the engine is imported).
"""

import json

import torch

from dreamzero_ros.engine.model.attention import attention_kernel
from dreamzero_ros.engine.model.kv_cache import Fp8KVCache, _quantize_rows
from dreamzero_ros.engine.speed.fp8_attention_kernel import KernelConfig, _quantized, kernel_config

HEADS, HEAD_DIM = 3, 32


def _e4m3_rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` as the kernel reads it: e4m3 per vector, float32 scale ``amax / 448``."""
    scale = x.float().abs().amax(-1, keepdim=True).clamp(min=1e-12) / 448
    return (x.float() / scale).to(torch.float8_e4m3fn).double() * scale.double()


def _cache_rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` as the cache stores it: e4m3 per vector, bfloat16 scale (``_quantize_rows``)."""
    values, scale = _quantize_rows(x, torch.bfloat16)
    return values.double() * scale.double()


def _attention(parts: list[tuple[torch.Tensor, ...]]) -> torch.Tensor:
    """Exact unmasked attention in float64, ``(B, L, H, D)`` layout.

    ``parts``: ``(q, k, v)`` for each part of the keys, with the queries that part sees.
    """
    scores = torch.cat(
        [torch.einsum('bqhd,bkhd->bhqk', q.double(), k.double()) for q, k, _ in parts], dim=-1
    )
    v = torch.cat([v.double() for _, _, v in parts], dim=1)
    return torch.einsum('bhqk,bkhd->bqhd', (scores * parts[0][0].shape[-1] ** -0.5).softmax(-1), v)


def _rel(a: torch.Tensor, b: torch.Tensor) -> dict:
    err = a.double() - b.double()
    return {
        'max_abs': float(err.abs().max() / b.double().abs().max()),
        'rms': float(err.pow(2).mean().sqrt() / b.double().pow(2).mean().sqrt()),
    }


def call_checks(cached_video: int, config: KernelConfig) -> dict:
    """One prefill of ``cached_video`` tokens, then a denoising call of 30 video + 5 registers.

    ``config.new_fp8``: the new tokens quantized (else attended in bf16).  The kernel (16 x 16
    tiles: several blocks, the last ones partial) against the exact attention of the quantized
    operands, and against the dequantizing path it replaces.
    """
    g = torch.Generator().manual_seed(cached_video + config.pv_fp8)
    kernel_config(config)
    new_fp8 = config.new_fp8
    cache = Fp8KVCache(2, 2, HEADS, HEAD_DIM, 80, 5, torch.bfloat16, 'cpu')
    if cached_video:
        cache.begin(cached_video, 0)
        for layer in range(2):
            for slot in cache.slots(layer):
                slot.copy_(2 * torch.randn(slot.shape, generator=g))
        cache.commit()
    cache.begin(30, 5)
    k_new, v_new = cache.slots(1)
    k_new.copy_(torch.randn(k_new.shape, generator=g))
    v_new.copy_(3 * torch.randn(v_new.shape, generator=g) + 1)
    q = (2 * torch.randn(k_new.shape, generator=g)).bfloat16()
    with attention_kernel('fp8'):
        fp8 = cache.attend_written(1, q)
    dequantized = cache.attend_written(1, q)  # the model-dtype path: sdpa over a bf16 copy
    cached = slice(0, cache.length)
    k_cached = cache.k8[1, :, cached].double() * cache.k_scale[1, :, cached].double()
    v_cached = cache.v8[1, :, cached].double() * cache.v_scale[1, :, cached].double()
    # the transposed-V kernel quantizes the new tokens as the cache does (bfloat16 scales)
    rows = _cache_rows if config.transposed_v else _e4m3_rows
    new = (_e4m3_rows(q), rows(k_new), rows(v_new)) if new_fp8 else (q, k_new, v_new)
    quantized = _attention([(_e4m3_rows(q), k_cached, v_cached), new])
    return {
        'shape': list(fp8.shape),
        'dtype': str(fp8.dtype),
        'vs_quantized': _rel(fp8, quantized),
        'vs_dequantized': _rel(fp8, dequantized),
        'dequantized_vs_quantized': _rel(dequantized, quantized),
    }


def quantize_checks() -> dict:
    """The kernel's quantization of new tokens against the cache's, token-major and transposed."""
    x = 3 * torch.randn(2, 37, HEADS, HEAD_DIM, generator=torch.Generator().manual_seed(1))
    x = x.bfloat16()
    values, scale = _quantize_rows(x, torch.bfloat16)
    rows, rows_scale = _quantized(x, transposed=False)
    columns, columns_scale = _quantized(x, transposed=True)
    return {
        'token_major': torch.equal(rows.float(), values.float()) and torch.equal(rows_scale, scale),
        'transposed': list(columns.shape) == [2, HEADS, HEAD_DIM, 37]
        and columns.stride(-1) == 1
        and torch.equal(columns.permute(0, 3, 1, 2).float(), values.float())
        and torch.equal(columns_scale, scale),
    }


if __name__ == '__main__':
    tiles = {'block_m': 16, 'block_n': 16}
    vt = {**tiles, 'transposed_v': True}
    cases = {
        '0-bf16': (0, KernelConfig(**tiles, new_fp8=True)),
        '40-bf16': (40, KernelConfig(**tiles, new_fp8=True)),
        '40-fp8': (40, KernelConfig(**tiles, pv_fp8=True, new_fp8=True)),
        '40-bf16-new-bf16': (40, KernelConfig(**tiles)),
        # the transposed-V kernel: P V in bf16, FP8, FP8 in two terms; TMA descriptor loads
        'vt-40-bf16-new-bf16': (40, KernelConfig(**vt)),
        'vt-40-fp8-new-bf16': (40, KernelConfig(**vt, pv_fp8=True, tma=True)),
        'vt-40-fp8x2-new-bf16': (40, KernelConfig(**vt, pv_fp8=True, pv_split=True)),
        'vt-0-fp8-new-fp8': (0, KernelConfig(**vt, pv_fp8=True, new_fp8=True)),
        'vt-40-fp8-new-fp8': (
            40,
            KernelConfig(**vt, pv_fp8=True, new_fp8=True, tma=True, warp_specialize=True),
        ),
        'vt-40-fp8x2-new-fp8': (40, KernelConfig(**vt, pv_fp8=True, pv_split=True, new_fp8=True)),
        # the new tokens by torch's attention (float32 on the CPU), the kernel going on from its
        # output and log-sum-exp
        'vt-40-fp8x2-new-sdpa': (
            40,
            KernelConfig(**vt, pv_fp8=True, pv_split=True, tma=True, new_sdpa='cudnn'),
        ),
        'vt-0-fp8x2-new-sdpa': (
            0,
            KernelConfig(**vt, pv_fp8=True, pv_split=True, new_sdpa='flash'),
        ),
        # 2 ** x in float16 (rounded as the GPU's ex2.approx.f16x2 would, near enough)
        'vt-40-fp8-new-fp8-exp16': (
            40,
            KernelConfig(**vt, pv_fp8=True, new_fp8=True, exp_fp16=True),
        ),
        'vt-40-fp8x2-new-fp8-exp16': (
            40,
            KernelConfig(**vt, pv_fp8=True, pv_split=True, new_fp8=True, exp_fp16=True),
        ),
    }
    checks = {name: call_checks(*case) for name, case in cases.items()}
    checks['quantize'] = quantize_checks()
    print(json.dumps(checks))
