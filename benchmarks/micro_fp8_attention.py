# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Self-attention over an FP8 K/V cache: the FP8 kernel against the bf16 path (CUDA).

The DiT's self-attention calls (2 x 1785 queries, 40 heads of 128) over a cache of FP8 keys and
values with one scale per token and head, plus the call's 1785 new bf16 keys/values:

* ``dequant+cudnn``: what ``kv_cache: fp8`` does without FP8 attention -- the cached tokens
  dequantized into a bf16 working buffer, then cuDNN over ``[cache | new]`` (the reference);
* ``cudnn``: cuDNN alone over bf16 keys/values (``kv_cache: model``);
* ``fp8 <tiles>``: :func:`~dreamzero_ros.engine.speed.fp8_attention_kernel.fp8_kv_attention`
  per tile configuration and ``P V`` precision.

Median ms per call (CUDA-graph replay of 10 calls), TFLOP/s, and the error of each against the
reference: max |d| and rms of the difference over the rms of the reference output.  The
fastest FP8 configuration over the three shapes is printed last.

    python benchmarks/micro_fp8_attention.py
"""

from __future__ import annotations

from bench_timing import graph_ms
import torch

from dreamzero_ros.engine.model.attention import attention_kernel, sdpa
from dreamzero_ros.engine.model.kv_cache import _quantize_rows
from dreamzero_ros.engine.speed.fp8_attention_kernel import (
    KernelConfig,
    fp8_kv_attention,
    kernel_config,
)
from dreamzero_ros.engine.speed.kv_fp8_kernel import dequantize_into

#: Configurations tried: (block_m, block_n, warps, stages, P V in FP8, new tokens in FP8).
CONFIGS = [
    KernelConfig(128, 128, 8, 3, False),
    KernelConfig(128, 64, 8, 3, False),
    KernelConfig(128, 128, 8, 3, True),
    KernelConfig(128, 128, 8, 3, False, False),
    KernelConfig(128, 64, 8, 3, False, False),
    KernelConfig(128, 64, 8, 2, False, False),
    KernelConfig(128, 128, 8, 2, False, False),
]


_CONFIG_BY_NAME: dict[str, KernelConfig] = {}


def _error(out: torch.Tensor, reference: torch.Tensor) -> dict:
    diff = out.float() - reference.float()
    scale = reference.float().pow(2).mean().sqrt()
    return {
        'max_abs': float(diff.abs().max()),
        'rel_rms': float(diff.pow(2).mean().sqrt() / scale),
    }


def _shape_rows(device: torch.device, operands: list, calls: int, repeats: int) -> dict:
    """Every kernel on one shape: ``q, k8, k_scale, v8, v_scale, k_new, v_new``."""
    q, k8, k_scale, v8, v_scale, k_new, v_new = operands
    batch, queries, heads, head_dim = q.shape
    cached = k8.shape[1]
    work_k = torch.cat([k8.to(q.dtype), k_new], dim=1)
    work_v = torch.cat([v8.to(q.dtype), v_new], dim=1)

    def dequant_cudnn() -> torch.Tensor:
        dequantize_into(k8, k_scale, work_k[:, :cached])
        dequantize_into(v8, v_scale, work_v[:, :cached])
        return sdpa(q, work_k, work_v)

    def fp8() -> torch.Tensor:
        return fp8_kv_attention(q, k8, v8, k_scale, v_scale, k_new, v_new)

    keys = cached + queries
    flops = 4 * batch * heads * queries * keys * head_dim
    rows = {}
    with attention_kernel('cudnn'):
        reference = dequant_cudnn()
        exact = sdpa(q.float(), work_k.float(), work_v.float())
        for name, fn in (
            ('dequant+cudnn', dequant_cudnn),
            ('cudnn', lambda: sdpa(q, work_k, work_v)),
        ):
            rows[name] = {'ms': graph_ms(device, fn, calls, repeats), **_error(fn(), reference)}
        for config in CONFIGS:
            kernel_config(config)
            name = (
                f'fp8 {config.block_m}x{config.block_n} w{config.num_warps} '
                f's{config.num_stages} pv-{"fp8" if config.pv_fp8 else "bf16"}'
                f'{"" if config.new_fp8 else " new-bf16"}'
            )
            _CONFIG_BY_NAME[name] = config
            try:
                out = fp8()
                rows[name] = {
                    'ms': graph_ms(device, fp8, calls, repeats),
                    **_error(out, reference),
                    'vs_float32': _error(out, exact),
                }
            except Exception as error:  # noqa: BLE001 - a configuration may not compile
                print(f'  {cached} cached, {name}: {type(error).__name__}: {error}'[:400])
    rows['dequant+cudnn']['vs_float32'] = _error(reference, exact)
    print(f'  {cached} cached + {queries} new keys ({flops / 1e12:.3f} TFLOP per call):')
    for name, row in rows.items():
        row['tflops'] = flops / row['ms'] / 1e9
        vs32 = row.get('vs_float32')
        print(
            f'    {name:<26} {row["ms"]:.4f} ms {row["tflops"]:>4.0f} TFLOP/s, vs reference '
            f'max |d| {row["max_abs"]:.3g} rms {row["rel_rms"]:.3g}'
            + (f'; vs float32 rms {vs32["rel_rms"]:.3g}' if vs32 else '')
        )
    return rows


def fp8_attention_benchmark(device: torch.device, calls: int = 10, repeats: int = 10) -> dict:
    """Time and error of every configuration at the DiT's self-attention shapes (see above)."""
    if device.type != 'cuda':
        return {}
    batch, queries, heads, head_dim = 2, 1785, 40, 128
    g = torch.Generator(device).manual_seed(0)

    def randn(length: int) -> torch.Tensor:
        shape = (batch, length, heads, head_dim)
        return torch.randn(*shape, device=device, generator=g).bfloat16()

    print(f'\nFP8 K/V attention, {batch} x {queries} queries + new keys, {heads} x {head_dim}')
    result: dict = {}
    initial = kernel_config()
    for cached in (880, 3520, 6160):
        operands = [randn(queries)]
        for _ in range(2):
            operands += _quantize_rows(randn(cached), torch.bfloat16)
        operands += [randn(queries), randn(queries)]
        result[cached] = _shape_rows(device, operands, calls, repeats)
    kernel_config(initial)
    totals: dict[str, float] = {}
    for rows in result.values():
        for name, row in rows.items():
            totals[name] = totals.get(name, 0.0) + row['ms']
    fp8 = {name: ms for name, ms in totals.items() if name.startswith('fp8')}
    if fp8:
        fastest = min(fp8, key=fp8.get)
        print(
            f'  over the three shapes: fastest FP8 {fastest} {fp8[fastest]:.3f} ms, '
            f'dequant+cudnn {totals["dequant+cudnn"]:.3f} ms, cudnn {totals["cudnn"]:.3f} ms'
        )
        result['fastest'] = fastest
        result['fastest_config'] = _CONFIG_BY_NAME[fastest]
    return result


if __name__ == '__main__':
    fp8_attention_benchmark(torch.device('cuda'))
