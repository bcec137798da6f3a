# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Self-attention over an FP8 K/V cache: the FP8 kernels against the bf16 path (CUDA).

The DiT's self-attention calls (2 x 1785 queries, 40 heads of 128) over a cache of FP8 keys and
values with one scale per token and head, plus the call's 1785 new bf16 keys/values:

* ``dequant+cudnn``: what ``kv_cache: fp8`` does without FP8 attention -- the cached tokens
  dequantized into a bf16 working buffer, then cuDNN over ``[cache | new]`` (the reference);
* ``cudnn``: cuDNN alone over bf16 keys/values (``kv_cache: model``);
* ``fp8 <tiles>``: :func:`~dreamzero_ros.engine.speed.fp8_attention_kernel.fp8_kv_attention`
  with the token-major kernel (V as the cache holds it);
* ``vt <tiles>``: the same op with the ``transposed_v`` kernel, reading the cache's
  token-contiguous copy of V (made here once, outside the timing, as the cache keeps it):
  ``P V`` in bf16, FP8 (``pv-fp8``) or FP8 in two terms (``pv-fp8x2``); the new tokens in bf16
  or quantized once per call (``new-fp8``) or attended by torch's cuDNN / flash kernel with
  its log-sum-exp, the kernel going on from there (``new-cudnn``, ``new-flash``); ``tma``:
  descriptor loads; ``ws``: warp-specialised loops; ``exp16``: ``2 ** x`` of the FP8 blocks in
  float16.

Median ms per call (CUDA-graph replay of 10 calls), TFLOP/s, and the error of each against the
reference: max |d| and rms of the difference over the rms of the reference output.  A
configuration that fails (does not compile, runs out of shared memory) prints its error and
the sweep goes on; configurations left when ``budget_s`` has passed are skipped.  Last: a table
of every configuration's time over the reference's at each shape, the fastest FP8
configuration, and the fastest within the error budget (rel. rms <= ``ERROR_BUDGET`` at every
shape; the engine benchmark's ``--fp8-attention`` runs its variants with that one).  With the
environment variable ``OUT`` set the output is also written to ``$OUT/micro_fp8_attention.log``.

    python benchmarks/micro_fp8_attention.py
"""

from __future__ import annotations

import os
from pathlib import Path
import time

from bench_timing import graph_ms
import torch

from dreamzero_ros.engine.model.attention import attention_kernel, sdpa
from dreamzero_ros.engine.model.kv_cache import _quantize_rows
from dreamzero_ros.engine.speed import fp8_attention_kernel
from dreamzero_ros.engine.speed.fp8_attention_kernel import (
    KernelConfig,
    _quantized,
    fp8_kv_attention,
    kernel_config,
    transposed_v,
)
from dreamzero_ros.engine.speed.kv_fp8_kernel import dequantize_into

#: Relative rms error against the reference that a configuration may reach at every shape to be
#: kept for the engine (the token-major kernel's is 0.016-0.024 on these random operands).
ERROR_BUDGET = 0.03


def _vt(
    block_m: int,
    block_n: int,
    warps: int,
    stages: int,
    pv: str,
    new_fp8: bool,
    **flags: bool | str,
) -> KernelConfig:
    """A ``transposed_v`` configuration; ``pv``: ``bf16``, ``fp8`` or ``fp8x2``."""
    return KernelConfig(
        block_m, block_n, warps, stages, pv_fp8=pv != 'bf16', new_fp8=new_fp8,
        transposed_v=True, pv_split=pv == 'fp8x2', **flags,
    )  # fmt: skip


#: Configurations tried, the token-major kernel's default first.  A first H100 sweep of the
#: transposed-V kernel (before exp16 and new-cudnn/flash) found 64 x 128 tiles with 4 warps the
#: fastest (two CTAs per SM; the new tokens in bf16 inside the kernel need shared memory for a
#: second loop, one CTA per SM), FP8 P V in one term beyond the error budget and the new tokens
#: in FP8 slower (their per-call quantization) and beyond it too.
CONFIGS = [
    KernelConfig(128, 64, 8, 3),
    _vt(64, 128, 4, 3, 'fp8x2', False, tma=True, exp_fp16=True, new_sdpa='cudnn'),
    _vt(64, 128, 4, 3, 'fp8', False, tma=True, exp_fp16=True, new_sdpa='cudnn'),
    _vt(64, 128, 4, 3, 'fp8x2', False, tma=True, new_sdpa='cudnn'),
    _vt(64, 128, 4, 2, 'fp8x2', False, tma=True, exp_fp16=True, new_sdpa='cudnn'),
    _vt(64, 64, 4, 3, 'fp8x2', False, tma=True, exp_fp16=True, new_sdpa='cudnn'),
    _vt(128, 128, 8, 3, 'fp8x2', False, tma=True, exp_fp16=True, new_sdpa='cudnn'),
    _vt(64, 128, 4, 3, 'fp8x2', False, tma=True, exp_fp16=True, new_sdpa='flash'),
    _vt(64, 128, 4, 3, 'fp8x2', False, tma=True, exp_fp16=True),
    _vt(64, 128, 4, 3, 'bf16', False, tma=True),
    _vt(64, 128, 4, 3, 'fp8', True, tma=True),
    _vt(64, 128, 4, 3, 'fp8', True, tma=True, exp_fp16=True),
    _vt(64, 128, 4, 3, 'fp8x2', True, tma=True, exp_fp16=True),
    _vt(64, 128, 4, 3, 'fp8', True, tma=True, warp_specialize=True, exp_fp16=True),
    _vt(128, 64, 8, 3, 'fp8x2', False, tma=True, exp_fp16=True),
]


_CONFIG_BY_NAME: dict[str, KernelConfig] = {}


class _Log:
    """Prints lines, and appends them to ``$OUT/micro_fp8_attention.log`` where ``OUT`` is set."""

    def __init__(self) -> None:
        out = os.environ.get('OUT')
        self.path = Path(out) / 'micro_fp8_attention.log' if out else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text('')

    def __call__(self, line: str) -> None:
        print(line, flush=True)
        if self.path is not None:
            with self.path.open('a') as file:
                file.write(line + '\n')


def _quantize_new(k_new: torch.Tensor, v_new: torch.Tensor) -> None:
    """What a new-fp8 configuration does before its kernel: the new K token-major, V transposed."""
    _quantized(k_new, transposed=False)
    _quantized(v_new, transposed=True)


def _one_line(error: BaseException) -> str:
    """An exception as one line: its type and last line, and its cause's (compile errors)."""
    parts = []
    while error is not None and len(parts) < 3:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        parts.append(f'{type(error).__name__}: {lines[-1] if lines else ""}')
        error = error.__cause__
    return ' <- '.join(parts)[:400]


def _error(out: torch.Tensor, reference: torch.Tensor) -> dict:
    diff = out.float() - reference.float()
    scale = reference.float().pow(2).mean().sqrt()
    return {
        'max_abs': float(diff.abs().max()),
        'rel_rms': float(diff.pow(2).mean().sqrt() / scale),
    }


def _shape_rows(
    device: torch.device, operands: list, calls: int, repeats: int, log: _Log, deadline: float
) -> dict:
    """Every kernel on one shape: ``q, k8, k_scale, v8, v_scale, k_new, v_new``."""
    q, k8, k_scale, v8, v_scale, k_new, v_new = operands
    vt8 = transposed_v(v8)  # the cache's token-contiguous copy, made when tokens enter it
    batch, queries, heads, head_dim = q.shape
    cached = k8.shape[1]
    work_k = torch.cat([k8.to(q.dtype), k_new], dim=1)
    work_v = torch.cat([v8.to(q.dtype), v_new], dim=1)

    def dequant_cudnn() -> torch.Tensor:
        dequantize_into(k8, k_scale, work_k[:, :cached])
        dequantize_into(v8, v_scale, work_v[:, :cached])
        return sdpa(q, work_k, work_v)

    def fp8() -> torch.Tensor:
        return fp8_kv_attention(q, k8, v8, k_scale, v_scale, k_new, v_new, vt8)

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
            if time.monotonic() > deadline:
                log(f'  {cached} cached, {config.name}: skipped (time budget spent)')
                continue
            kernel_config(config)
            try:
                out = fp8()
                rows[config.name] = {
                    'ms': graph_ms(device, fp8, calls, repeats),
                    **_error(out, reference),
                    'vs_float32': _error(out, exact),
                }
                _CONFIG_BY_NAME[config.name] = config
            except Exception as error:  # noqa: BLE001 - a configuration may not compile
                log(f'  {cached} cached, {config.name}: {_one_line(error)}')
    rows['dequant+cudnn']['vs_float32'] = _error(reference, exact)
    log(f'  {cached} cached + {queries} new keys ({flops / 1e12:.3f} TFLOP per call):')
    try:  # the part of the new-fp8 configurations' time spent quantizing the new tokens
        quantize_ms = graph_ms(device, lambda: _quantize_new(k_new, v_new), calls, repeats)
        log(f'    (new-fp8: quantizing the new keys and values takes {quantize_ms:.4f} ms)')
    except Exception as error:  # noqa: BLE001
        log(f'    (new-fp8 quantization: {_one_line(error)})')
    width = max(len(name) for name in rows)
    for name, row in rows.items():
        row['tflops'] = flops / row['ms'] / 1e9
        vs32 = row.get('vs_float32')
        log(
            f'    {name:<{width}} {row["ms"]:.4f} ms {row["tflops"]:>4.0f} TFLOP/s, '
            f'x{row["ms"] / rows["dequant+cudnn"]["ms"]:.2f} of dequant+cudnn, vs reference '
            f'max |d| {row["max_abs"]:.3g} rms {row["rel_rms"]:.3g}'
            + (f'; vs float32 rms {vs32["rel_rms"]:.3g}' if vs32 else '')
        )
    return rows


def _summary(result: dict, log: _Log) -> None:
    """Each configuration's time over dequant+cuDNN's per shape; the fastest ones."""
    shapes = list(result)
    names = [n for n in result[shapes[0]] if all(n in result[s] for s in shapes)]
    width = max(len(name) for name in names)
    log('  time / dequant+cudnn per cached length ' + ' '.join(f'{s:>6}' for s in shapes))
    totals = {}
    for name in names:
        ratios = [result[s][name]['ms'] / result[s]['dequant+cudnn']['ms'] for s in shapes]
        worst = max(result[s][name]['rel_rms'] for s in shapes)
        totals[name] = sum(result[s][name]['ms'] for s in shapes)
        log(
            f'    {name:<{width}} ' + ' '.join(f'{r:>6.2f}' for r in ratios)
            + f'   max rel. rms {worst:.3g}'
        )  # fmt: skip
    fp8 = {n: ms for n, ms in totals.items() if n in _CONFIG_BY_NAME}
    if not fp8:
        return
    within = {
        n: ms for n, ms in fp8.items()
        if all(result[s][n]['rel_rms'] <= ERROR_BUDGET for s in shapes)
    }  # fmt: skip
    fastest = min(fp8, key=fp8.get)
    log(
        f'  over the shapes: fastest FP8 {fastest} {fp8[fastest]:.3f} ms, '
        f'dequant+cudnn {totals["dequant+cudnn"]:.3f} ms, cudnn {totals["cudnn"]:.3f} ms'
    )
    if within:
        kept = min(within, key=within.get)
        log(f'  fastest within rel. rms <= {ERROR_BUDGET}: {kept} {within[kept]:.3f} ms')
        result['fastest'] = kept
        result['fastest_config'] = _CONFIG_BY_NAME[kept]


def fp8_attention_benchmark(
    device: torch.device, calls: int = 10, repeats: int = 10, budget_s: float = 120.0
) -> dict:
    """Time and error of every configuration at the DiT's self-attention shapes (see above)."""
    if device.type != 'cuda':
        return {}
    log = _Log()
    deadline = time.monotonic() + budget_s
    batch, queries, heads, head_dim = 2, 1785, 40, 128
    g = torch.Generator(device).manual_seed(0)

    def randn(length: int) -> torch.Tensor:
        shape = (batch, length, heads, head_dim)
        return torch.randn(*shape, device=device, generator=g).bfloat16()

    log(f'\nFP8 K/V attention, {batch} x {queries} queries + new keys, {heads} x {head_dim}')
    log(
        f'  {torch.cuda.get_device_name(device)}, torch {torch.__version__}, '
        f'Triton {getattr(fp8_attention_kernel.triton, "__version__", "missing")}'
    )
    result: dict = {}
    initial = kernel_config()
    try:
        for cached in (880, 3520, 6160):
            operands = [randn(queries)]
            for _ in range(2):
                operands += _quantize_rows(randn(cached), torch.bfloat16)
            operands += [randn(queries), randn(queries)]
            result[cached] = _shape_rows(device, operands, calls, repeats, log, deadline)
    finally:
        kernel_config(initial)
    _summary(result, log)
    return result


if __name__ == '__main__':
    fp8_attention_benchmark(torch.device('cuda'))
