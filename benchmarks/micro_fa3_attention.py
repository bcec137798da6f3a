# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The DiT's attention calls through cuDNN and FlashAttention-3 (``--fa3``, CUDA)."""

from __future__ import annotations

import functools
import statistics
from typing import Any

from bench_timing import timed_ms
import torch

from dreamzero_ros.engine.networks.attention import attention_kernel, sdpa


def _repeat(fn: Any, args: tuple, count: int) -> None:
    for _ in range(count):
        fn(*args)


def fa3_benchmark(device: torch.device, repeats: int = 20) -> dict:
    """The DiT's attention calls through cuDNN and through FlashAttention-3.

    2 x 1785 queries, 40 heads of 128: self-attention over a new window's first context
    (2665 keys) up to a full window (7945), cross-attention over 512 text / 257 image tokens;
    median ms per call (host-timed, device-synchronised, over 10 back-to-back calls), TFLOP/s
    and each kernel's largest difference from float32 attention of the same bf16 inputs.
    """
    if device.type != 'cuda':
        return {}
    batch, queries, heads, head_dim = 2, 1785, 40, 128
    generator = torch.Generator(device).manual_seed(0)

    def randn(length: int) -> torch.Tensor:
        shape = (batch, length, heads, head_dim)
        return torch.randn(*shape, device=device, generator=generator).bfloat16()

    print(f'\nattention, {batch} x {queries} queries, {heads} x {head_dim}: cuDNN vs FA3')
    result = {}
    for keys in (2665, 5305, 7945, 512, 257):
        q, k, v = randn(queries), randn(keys), randn(keys)
        exact = sdpa(q.float(), k.float(), v.float())
        flops = 4 * batch * heads * queries * keys * head_dim
        row = {}
        for name in ('cudnn', 'fa3'):
            with attention_kernel(name):
                out = sdpa(q, k, v)
                calls = functools.partial(_repeat, sdpa, (q, k, v), 10)
                times = timed_ms(device, calls, repeats)
            ms = statistics.median(times) / 10
            error = float((out.float() - exact).abs().max())
            row[name] = {'ms': ms, 'tflops': flops / ms / 1e9, 'max_abs_vs_float32': error}
        result[keys] = row
        print(
            f'  {keys:>5} keys: '
            + ', '.join(
                f'{n} {r["ms"]:.4f} ms {r["tflops"]:.0f} TFLOP/s |d| {r["max_abs_vs_float32"]:.3g}'
                for n, r in row.items()
            )
            + f', fa3/cudnn {row["fa3"]["ms"] / row["cudnn"]["ms"]:.3f}'
        )
    return result
