# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Kernel rates behind the DiT on this GPU: the ceilings, the DiT's matrix products, attention.

Measures, with CUDA events (median of the repeats, after warm-up, random data):

* the ceilings: a large bf16 matrix product (8192^3) and a device-to-device copy;
* the matrix products of one 14B DiT block at batched-CFG shapes (2 x 1785 tokens): fused q/k/v,
  an output projection, the FFN pair -- in bf16, and in FP8 e4m3 through ``torch._scaled_mm``
  with rowwise and tensorwise scales (inputs already quantized), plus the cost of quantizing
  the input rowwise;
* scaled-dot-product attention at the DiT's shapes: self-attention of 1785 queries over the
  cached window (2665 ... 7945 keys, the K/V a view of the preallocated cache) and of a prefill,
  cross-attention over 512 text and 257 image tokens -- the kernel torch picks by itself, then
  each kernel forced (cudnn, flash, efficient).

Prints a table and writes the numbers as JSON (``--json``).  CUDA only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F  # noqa: N812

from dreamzero_ros.engine.networks.fp8 import quantize, quantize_weight

_BACKENDS = {
    'cudnn': SDPBackend.CUDNN_ATTENTION,
    'flash': SDPBackend.FLASH_ATTENTION,
    'efficient': SDPBackend.EFFICIENT_ATTENTION,
}
_NAMES = {int(member.value): name for name, member in SDPBackend.__members__.items()}


def time_ms(fn, warmup: int = 3, repeats: int = 10) -> float:
    """Median milliseconds of ``fn()`` measured with CUDA events."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def ceilings(device: torch.device) -> dict:
    """bf16 matrix rate and copy bandwidth."""
    n = 8192
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    ms = time_ms(lambda: a @ b)
    src = torch.randn(2**28, device=device, dtype=torch.float32)  # 1 GiB
    dst = torch.empty_like(src)
    copy_ms = time_ms(lambda: dst.copy_(src))
    return {
        'bf16_matmul_tflops': 2 * n**3 / ms / 1e9,
        'copy_tb_s': 2 * src.numel() * 4 / copy_ms / 1e9,
    }


def matmuls(device: torch.device, tokens: int, dim: int, ffn: int) -> list[dict]:
    """bf16 and FP8 rates of a block's matrix products for ``tokens`` rows."""
    shapes = {
        'qkv': (3 * dim, dim),
        'o / cross q,o': (dim, dim),
        'ffn in': (ffn, dim),
        'ffn out': (dim, ffn),
    }
    rows = []
    for name, (out_features, in_features) in shapes.items():
        x = torch.randn(tokens, in_features, device=device, dtype=torch.bfloat16)
        w = torch.randn(out_features, in_features, device=device, dtype=torch.bfloat16) * 0.02
        bias = torch.randn(out_features, device=device, dtype=torch.bfloat16)
        flops = 2 * tokens * in_features * out_features
        row = {'name': name, 'm': tokens, 'n': out_features, 'k': in_features}
        row['bf16_tflops'] = flops / time_ms(lambda x=x, w=w, b=bias: F.linear(x, w, b)) / 1e9
        for mode in ('rowwise', 'tensorwise'):
            qw = quantize_weight(w, bias, mode)
            qx, sx = quantize(x, mode == 'rowwise')
            try:
                ms = time_ms(
                    lambda qx=qx, sx=sx, qw=qw: torch._scaled_mm(
                        qx,
                        qw.weight.t(),
                        scale_a=sx,
                        scale_b=qw.scale,
                        bias=qw.bias,
                        out_dtype=torch.bfloat16,
                    )
                )
                row[f'fp8_{mode}_tflops'] = flops / ms / 1e9
            except RuntimeError as error:
                row[f'fp8_{mode}_error'] = str(error).splitlines()[0]
        row['quantize_rowwise_ms'] = time_ms(lambda x=x: quantize(x, True))
        rows.append(row)
    return rows


def _attention_ms(q, k, v, backend: SDPBackend | None = None) -> float:
    """Milliseconds of one attention call, with ``backend`` forced if given."""
    if backend is None:
        return time_ms(lambda: F.scaled_dot_product_attention(q, k, v))
    with sdpa_kernel([backend]):
        return time_ms(lambda: F.scaled_dot_product_attention(q, k, v))


def attention(device: torch.device, heads: int, head_dim: int) -> list[dict]:
    """Attention rates at the DiT's shapes for the default and each forced kernel."""
    batch, frame = 2, 880
    capacity = 9 * frame + 25
    cache = torch.randn(2, batch, capacity, heads, head_dim, device=device, dtype=torch.bfloat16)
    cases = []
    for cached in (1, 3, 5, 7):  # denoising calls of a window's 4 chunks
        cases.append((f'self 1785 q / {cached * frame + 1785} k', 1785, cached * frame + 1785))
    cases.append(('prefill 1760 q / 7920 k', 1760, 7920))
    cases.append(('cross 1785 q / 512 text', 1785, 512))
    cases.append(('cross 1785 q / 257 image', 1785, 257))
    rows = []
    for name, queries, keys in cases:
        q = torch.randn(batch, queries, heads, head_dim, device=device, dtype=torch.bfloat16)
        if name.startswith('cross'):
            kv = torch.randn(2, batch, keys, heads, head_dim, device=device, dtype=torch.bfloat16)
            k, v = kv[0], kv[1]
        else:
            k, v = cache[0, :, :keys], cache[1, :, :keys]  # views of the preallocated cache
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        flops = 4 * batch * heads * queries * keys * head_dim
        row = {'name': name, 'queries': queries, 'keys': keys}
        row['default'] = _NAMES.get(int(torch._fused_sdp_choice(qt, kt, vt)), '?')
        row['default_tflops'] = flops / _attention_ms(qt, kt, vt) / 1e9
        runs = [(label, backend, kt, vt) for label, backend in _BACKENDS.items()]
        if not name.startswith('cross'):
            runs.append(
                ('cudnn_contiguous_kv', _BACKENDS['cudnn'], kt.contiguous(), vt.contiguous())
            )
        for label, backend, keys_, values in runs:
            try:
                row[f'{label}_tflops'] = flops / _attention_ms(qt, keys_, values, backend) / 1e9
            except RuntimeError as error:
                row[f'{label}_error'] = str(error).splitlines()[0][:160]
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Measure and print; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--json', help='write the results to this JSON file')
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print('dit_kernels needs a CUDA device', file=sys.stderr)
        return 2
    device = torch.device('cuda')
    props = torch.cuda.get_device_properties(device)
    info = {
        'device': props.name,
        'sms': props.multi_processor_count,
        'torch': torch.__version__,
        'cuda': torch.version.cuda,
        'cudnn': torch.backends.cudnn.version(),
    }
    print(info)
    result = {'info': info, 'ceilings': ceilings(device)}
    print(
        f'ceilings: bf16 matmul {result["ceilings"]["bf16_matmul_tflops"]:.0f} TFLOP/s, '
        f'copy {result["ceilings"]["copy_tb_s"]:.2f} TB/s'
    )
    result['matmuls'] = matmuls(device, 2 * 1785, 5120, 13824)
    print(f'\n{"matmul (M=3570)":<16}{"N":>7}{"K":>7}{"bf16":>8}{"fp8 row":>9}{"fp8 tensor":>11}'
          f'{"quant ms":>10}')  # fmt: skip
    for row in result['matmuls']:
        print(
            f'{row["name"]:<16}{row["n"]:>7}{row["k"]:>7}{row["bf16_tflops"]:>8.0f}'
            f'{row.get("fp8_rowwise_tflops", 0):>9.0f}{row.get("fp8_tensorwise_tflops", 0):>11.0f}'
            f'{row["quantize_rowwise_ms"]:>10.3f}'
        )
    result['attention'] = attention(device, 40, 128)
    print(
        f'\n{"attention (B=2, 40 heads)":<28}{"default":>20}{"TF/s":>6}{"cudnn":>7}{"flash":>7}'
        f'{"effic":>7}{"cudnn contig":>13}'
    )
    for row in result['attention']:
        print(
            f'{row["name"]:<28}{row["default"]:>20}{row["default_tflops"]:>6.0f}'
            f'{row.get("cudnn_tflops", 0):>7.0f}{row.get("flash_tflops", 0):>7.0f}'
            f'{row.get("efficient_tflops", 0):>7.0f}'
            f'{row.get("cudnn_contiguous_kv_tflops", 0):>13.0f}'
        )
        for key, value in row.items():
            if key.endswith('_error'):
                print(f'    {key}: {value}')
    if args.json:
        with open(args.json, 'w') as handle:
            json.dump(result, handle, indent=2)
    return 0


if __name__ == '__main__':
    sys.exit(main())
