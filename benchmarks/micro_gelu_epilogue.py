# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The FFN input product with GELU after it and in the cuBLASLt epilogue (``--gelu``, CUDA)."""

from __future__ import annotations

import statistics

from bench_timing import timed_ms
import torch
import torch.nn.functional as F  # noqa: N812

from dreamzero_ros.engine.speed.block_transforms import TanhGeluFFN


def gelu_benchmark(device: torch.device, repeats: int = 20) -> dict:
    """The DiT's FFN input product (3570 x 13824 x 5120) with GELU after it and in its epilogue.

    Times both (CUDA, bf16) and compares each with the float32 result of the same bf16 inputs.
    """
    if device.type != 'cuda':
        return {}

    generator = torch.Generator(device).manual_seed(0)

    def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
        values = torch.randn(*shape, device=device, generator=generator) * scale
        return values.to(torch.bfloat16)

    x, weight, bias = randn(3570, 5120), randn(13824, 5120, scale=0.02), randn(13824, scale=0.1)
    exact = F.gelu(F.linear(x.float(), weight.float(), bias.float()), approximate='tanh')
    first = torch.nn.Linear(5120, 13824, device=device, dtype=torch.bfloat16).requires_grad_(False)
    first.weight.data.copy_(weight)
    first.bias.data.copy_(bias)
    ffn = TanhGeluFFN(first, torch.nn.GELU(approximate='tanh'), torch.nn.Identity())
    result = {}
    print('\nFFN input product 3570 x 13824 x 5120, bf16, with tanh GELU')
    variants = {
        'separate GELU': lambda: F.gelu(F.linear(x, weight, bias), approximate='tanh'),
        'GELU epilogue': lambda: ffn(x),  # the engine's
    }
    for label, call in variants.items():
        out = call()
        timed_ms(device, call, 5)
        times = timed_ms(device, call, repeats)
        error = float((out.float() - exact).norm() / exact.norm())
        result[label] = {'ms': statistics.median(times), 'rel_error': error}
        print(f'  {label}: {statistics.median(times):.3f} ms (median), rel. error {error:.2e}')
    return result
