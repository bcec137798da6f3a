# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Timing, peak memory and the one-core set-up shared by the benchmarks.

torch is imported where a device is synchronised: the host-side benchmarks (envelope, plan
views, camera fit) time their code without it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
import os
import resource
import statistics
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ['graph_ms', 'one_core_options', 'peak_memory_gib', 'timed_ms']


def peak_memory_gib(device: torch.device) -> float:
    """Peak allocated device memory (CUDA) or peak resident set size (CPU), GiB."""
    if device.type == 'cuda':
        import torch

        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def timed_ms(
    device: torch.device | None, fn: Callable[[], object], repeats: int, wait: bool = True
) -> list[float]:
    """Milliseconds of ``repeats`` calls of ``fn``.

    On a CUDA ``device`` each call starts on an idle device and, with ``wait``, ends once the
    device has finished it (``wait`` False: the host's time, the device's queue left running).
    ``device`` None: host code.
    """
    cuda = device is not None and device.type == 'cuda'
    if cuda:
        import torch
    times = []
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize(device)
        begin = time.perf_counter()
        fn()
        if cuda and wait:
            torch.cuda.synchronize(device)
        times.append((time.perf_counter() - begin) * 1e3)
    return times


def one_core_options(description: str, repeats: int = 300) -> argparse.Namespace:
    """``--repeats`` and ``--cpu`` parsed, and this process pinned to that one core."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument('--repeats', type=int, default=repeats)
    parser.add_argument('--cpu', type=int, default=0, help='the one core to run on')
    options = parser.parse_args()
    os.sched_setaffinity(0, {options.cpu})
    return options


def graph_ms(device: torch.device, fn: Callable[[], object], calls: int, repeats: int) -> float:
    """Median GPU milliseconds of one ``fn()``, replayed from a CUDA graph of ``calls`` calls."""
    import torch

    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):  # warm up outside the capture, on a side stream
        for _ in range(3):
            fn()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    return statistics.median(timed_ms(device, graph.replay, repeats)) / calls
