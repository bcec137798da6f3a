# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The loader's finite check of checkpoint tensors (``all_finite``) against the copy it guards.

Per GB of bf16 weights on the CPU: the loader's check (a sum), the element-wise check it
falls back on (``torch.isfinite(t).all()``, paid only when the sum is not finite), the copy of
a tensor into the model's tensor (what the loader does anyway: a bf16 engine copies, a
float32 one casts), and the check's cost relative to each; extrapolated to the 14B checkpoint
(``--checkpoint-gb``, 46 GB). The tensors are one GB in pieces of a DiT linear weight's size
(5120 x 13824).

Usage: ``python benchmarks/finite_weights.py [--gb 1] [--repeats 5] [--threads N]``.
"""

from __future__ import annotations

import argparse
import statistics

from bench_timing import timed_ms
import torch

from dreamzero_ros.engine.checkpoint.weights import all_finite


def main() -> None:
    """Print seconds per GB and the 46 GB extrapolation of each operation."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--gb', type=float, default=1.0, help='GB of bf16 weights to check')
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--threads', type=int, default=0, help='torch threads; 0: default')
    parser.add_argument('--checkpoint-gb', type=float, default=46.0)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    cpu = torch.device('cpu')
    shape = (5120, 13824)
    per_tensor = shape[0] * shape[1] * 2 / 1e9
    count = max(1, round(args.gb / per_tensor))
    gb = count * per_tensor
    stored = [torch.randn(shape).to(torch.bfloat16) for _ in range(count)]
    same = [torch.empty(shape, dtype=torch.bfloat16) for _ in range(count)]
    wider = [torch.empty(shape, dtype=torch.float32) for _ in range(count)]

    def check() -> None:
        assert all(all_finite(tensor) for tensor in stored)

    def copy(targets: list[torch.Tensor]) -> None:
        for source, target in zip(stored, targets, strict=True):
            target.copy_(source)

    print(f'{count} bf16 tensors {shape} = {gb:.2f} GB, {torch.get_num_threads()} threads')
    results = {
        'finite check': timed_ms(cpu, check, args.repeats),
        'element-wise isfinite': timed_ms(
            cpu, lambda: [bool(torch.isfinite(t).all()) for t in stored], args.repeats
        ),
        'copy bf16 -> bf16': timed_ms(cpu, lambda: copy(same), args.repeats),
        'cast bf16 -> float32': timed_ms(cpu, lambda: copy(wider), args.repeats),
    }
    check_s = statistics.median(results['finite check']) / 1e3 / gb
    for name, times in results.items():
        seconds = statistics.median(times) / 1e3 / gb
        print(
            f'{name:23s} {seconds:6.3f} s/GB  {1 / seconds:6.2f} GB/s  '
            f'check/this {check_s / seconds:5.2f}x  '
            f'{args.checkpoint_gb:g} GB: {seconds * args.checkpoint_gb:6.1f} s'
        )


if __name__ == '__main__':
    main()
