# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""GPU time of a torch.profiler run by kernel class: GEMMs, attention, convolutions, the rest.

The classes follow the kernels' names as cuBLAS, cuDNN, FlashAttention and inductor give them
on Hopper: ``nvjet``/``gemm``/``xmma_gemm``/``cutlass`` GEMMs, cuDNN's ``sdpa``/``fmha``/
``flash`` attention (FlashAttention-3 too), ``conv``/``fprop``/``implicit`` convolutions; every
other kernel (norms, modulation, quantization, rotary, residual adds, copies) is ``other``.
"""

from __future__ import annotations

from collections import defaultdict

CLASSES = ('gemm', 'attention', 'conv', 'other')


def kernel_class(name: str) -> str:
    """The class of a GPU kernel named ``name``."""
    lowered = name.lower()
    if any(key in lowered for key in ('sdpa', 'fmha', 'flash', 'attention', 'fprop_wgmma_f16')):
        return 'attention'
    if any(key in lowered for key in ('nvjet', 'gemm', 'cutlass', 'gemv', 'splitk')):
        return 'conv' if 'fprop' in lowered or 'conv' in lowered else 'gemm'
    if any(key in lowered for key in ('conv', 'fprop', 'implicit', 'nchwtonhwc', 'nhwctonchw')):
        return 'conv'
    return 'other'


def class_times_ms(prof: object) -> tuple[dict[str, float], dict[str, tuple[float, int]]]:
    """``(ms per class, {kernel: (ms, calls)} of the 'other' class)`` of a finished profile."""
    from torch.autograd import DeviceType

    totals: dict[str, float] = dict.fromkeys(CLASSES, 0.0)
    others: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for event in prof.events():
        if event.device_type != DeviceType.CUDA:
            continue
        us = getattr(event, 'device_time_total', None)
        if us is None:
            us = event.cuda_time_total
        kind = kernel_class(event.name)
        totals[kind] += us / 1e3
        if kind == 'other':
            others[event.name][0] += us / 1e3
            others[event.name][1] += 1
    return totals, {name: (ms, int(calls)) for name, (ms, calls) in others.items()}


def class_table(prof: object, per: float = 1.0, label: str = 'per call') -> str:
    """The class times (and the ten largest 'other' kernels) divided by ``per``, as text."""
    totals, others = class_times_ms(prof)
    whole = sum(totals.values())
    lines = [f'GPU time by kernel class, ms {label} (total {whole / per:.2f}):']
    lines += [
        f'  {kind:<9} {ms / per:9.3f}  {100 * ms / max(whole, 1e-9):5.1f} %'
        for kind, ms in totals.items()
    ]
    lines.append('  largest "other" kernels:')
    for name, (ms, calls) in sorted(others.items(), key=lambda item: -item[1][0])[:12]:
        lines.append(f'    {ms / per:8.3f} ms  {calls / per:6.1f} calls  {name[:110]}')
    return '\n'.join(lines)
