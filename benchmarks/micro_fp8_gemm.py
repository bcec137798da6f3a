# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The DiT's linear layers in FP8 at the engine's token counts: which kernel is fastest (CUDA).

Per layer shape of the 14B DiT (fused q/k/v, output and cross-attention query projections, FFN
in and out) and per token count M (3570: a batched-CFG denoising call; 1785: one branch; 880:
half of one), the median time of one product (CUDA-graph replay) of:

* ``bf16``: ``torch.nn.functional.linear`` in bf16;
* ``rowwise``: ``torch._scaled_mm`` with a scale per token and per output channel (the engine's
  ``fp8_linear: rowwise``);
* ``tensorwise``: ``torch._scaled_mm`` with one scale each (``fp8_linear: tensorwise``);
* ``... fast``: the same with ``use_fast_accum=True`` (Hopper's faster, less exact accumulation);
* ``quantize``: quantizing the input rows (rowwise) alone, as eager torch does it.

TFLOP/s and the ratio to bf16 are printed; the products exclude the input quantization.

    python benchmarks/micro_fp8_gemm.py
"""

from __future__ import annotations

from bench_timing import graph_ms
import torch
import torch.nn.functional as F  # noqa: N812

from dreamzero_ros.engine.networks.fp8 import quantize

#: (name, out features N, in features K) of the 14B DiT's block linears.
LAYERS = (
    ('qkv', 15360, 5120),
    ('o / cross q / cross o', 5120, 5120),
    ('ffn in', 13824, 5120),
    ('ffn out', 5120, 13824),
)
TOKENS = (3570, 1785, 880)


def _kernels(
    x: torch.Tensor,
    weight: torch.Tensor,
    w_row: torch.Tensor,
    s_row: torch.Tensor,
    w_ten: torch.Tensor,
    s_ten: torch.Tensor,
) -> dict:
    """The products of ``x`` with one layer's weight, by kernel name (see the module)."""
    x_row, xs_row = quantize(x, rowwise=True)
    x_ten, xs_ten = quantize(x, rowwise=False)
    out = torch.bfloat16

    def scaled(a: torch.Tensor, sa: torch.Tensor, w: torch.Tensor, sw: torch.Tensor, fast: bool):
        return lambda: torch._scaled_mm(
            a, w.t(), scale_a=sa, scale_b=sw, out_dtype=out, use_fast_accum=fast
        )

    return {
        'bf16': lambda: F.linear(x, weight),
        'rowwise': scaled(x_row, xs_row, w_row, s_row, False),
        'rowwise fast': scaled(x_row, xs_row, w_row, s_row, True),
        'tensorwise': scaled(x_ten, xs_ten, w_ten, s_ten, False),
        'tensorwise fast': scaled(x_ten, xs_ten, w_ten, s_ten, True),
        'quantize': lambda: quantize(x, rowwise=True),
    }


def fp8_gemm_benchmark(device: torch.device, calls: int = 20, repeats: int = 10) -> dict:
    """Milliseconds and TFLOP/s of each kernel per layer and token count (see above)."""
    if device.type != 'cuda':
        return {}
    g = torch.Generator(device).manual_seed(0)
    result: dict = {}
    print('\nFP8 GEMM at the DiT shapes (ms per product, TFLOP/s, x bf16 time)')
    for layer, n, k in LAYERS:
        weight = torch.randn(n, k, device=device, generator=g).bfloat16()
        w_row, s_row = quantize(weight, rowwise=True)
        w_ten, s_ten = quantize(weight, rowwise=False)
        s_row = s_row.reshape(1, n).contiguous()
        for m in TOKENS:
            x = torch.randn(m, k, device=device, generator=g).bfloat16()
            kernels = _kernels(x, weight, w_row, s_row, w_ten, s_ten)
            flops = 2 * m * n * k
            row = {}
            for name, fn in kernels.items():
                try:
                    ms = graph_ms(device, fn, calls, repeats)
                except Exception as error:  # noqa: BLE001 - a kernel may be missing
                    print(f'  {layer} M={m} {name}: {type(error).__name__}: {error}'[:300])
                    continue
                row[name] = {'ms': ms, 'tflops': flops / ms / 1e9}
            base = row['bf16']['ms']
            print(
                f'  {layer:<22} M={m:>4} N={n:>5} K={k:>5}: '
                + ', '.join(
                    f'{name} {r["ms"]:.4f} ({r["tflops"]:.0f}, {r["ms"] / base:.2f}x)'
                    for name, r in row.items()
                )
            )
            result[f'{layer} M={m}'] = row
    return result


if __name__ == '__main__':
    fp8_gemm_benchmark(torch.device('cuda'))
