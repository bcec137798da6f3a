# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Device-synchronised timing and peak memory, shared by the benchmarks."""

from __future__ import annotations

from collections.abc import Callable
import resource
import statistics
import time

import torch

__all__ = ['graph_ms', 'peak_memory_gib', 'timed_ms']


def peak_memory_gib(device: torch.device) -> float:
    """Peak allocated device memory (CUDA) or peak resident set size (CPU), GiB."""
    if device.type == 'cuda':
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def timed_ms(device: torch.device, fn: Callable[[], object], repeats: int) -> list[float]:
    """Milliseconds of ``repeats`` calls of ``fn`` (device-synchronised)."""
    times = []
    for _ in range(repeats):
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
        begin = time.perf_counter()
        fn()
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
        times.append((time.perf_counter() - begin) * 1e3)
    return times


def graph_ms(device: torch.device, fn: Callable[[], object], calls: int, repeats: int) -> float:
    """Median GPU milliseconds of one ``fn()``, replayed from a CUDA graph of ``calls`` calls."""
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
