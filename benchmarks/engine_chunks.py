# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Timed chunks of one engine variant over a steady observation stream, and their summary."""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from bench_timing import peak_memory_gib
from engine_flops import chunk_flops
from kernel_classes import class_table
import numpy as np
import torch

from dreamzero_ros.engine.checkpoint.synthetic_droid import random_observation
from dreamzero_ros.engine.pipeline.engine import DreamZeroEngine


def run_schedule(
    engine: DreamZeroEngine, args: argparse.Namespace, rows: int, label: str, repeats: int
) -> dict:
    """Warm up, then time ``args.repeats`` chunks; print one line per chunk.

    Every variant sees the same observations (same seeds, a fresh session), so the actions of two
    variants are comparable chunk by chunk.
    """
    device = engine.device
    session = f'bench-{label}'
    engine.reset(session)
    step = 0
    actions: list[list[list[float]]] = []
    motion: list[float] = []

    def infer() -> Any:
        nonlocal step
        step += 1
        observation = random_observation(seed=step % 7, session_id=session, stamp=step / 15)
        chunk = engine.infer(observation)
        actions.append(chunk.actions.tolist())
        joints = np.asarray(observation.joint_position)
        motion.append(float(np.sqrt(np.mean((chunk.actions[:, :7] - joints) ** 2))))
        return chunk

    if device.type == 'cuda':
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
    resident_gib = torch.cuda.memory_allocated(device) / 2**30 if device.type == 'cuda' else 0.0
    warm_start = time.perf_counter()
    first_chunk_s = 0.0
    for index in range(args.warmup):
        infer()
        if index == 0:
            first_chunk_s = time.perf_counter() - warm_start
    warmup_s = time.perf_counter() - warm_start
    if device.type == 'cuda':
        torch.cuda.reset_peak_memory_stats(device)
    print(
        f'\n[{label}] warm-up {args.warmup} chunks: {warmup_s:.2f} s (first {first_chunk_s:.2f} s)'
        f'\n{"chunk":>5} {"frame":>5} {"new":>3} {"dit":>3} {"inputs":>7} {"encode":>8} '
        f'{"prefill":>8} {"denoise":>8} {"decode":>8} {"total":>8} {"TFLOP":>7} {"TFLOP/s":>8}'
        '  (ms)'
    )
    chunks = []
    for index in range(repeats):
        chunk = infer()
        stats = dict(engine.last_stats)
        prefill_flops, denoise_flops = chunk_flops(engine, stats, rows)
        t = chunk.timing_ms
        rate = denoise_flops / (t['denoise'] / 1e3) / 1e12 if t['denoise'] else 0.0
        row = {**stats, **t, 'tflop': (prefill_flops + denoise_flops) / 1e12, 'tflops': rate}
        chunks.append(row)
        print(
            f'{index:>5} {stats["start_frame"]:>5} {"y" if stats["new_window"] else "n":>3} '
            f'{stats["dit_calls"]:>3} {t["inputs"]:>7.1f} {t["encode"]:>8.1f} {t["prefill"]:>8.1f} '
            f'{t["denoise"]:>8.1f} {t["decode"]:>8.1f} {t["total"]:>8.1f} '
            f'{row["tflop"]:>7.3g} {rate:>8.3g}'
        )
    peak = peak_memory_gib(device)
    if args.profile and label in args.profile_variants:
        profile_chunk(infer, device, args.profile, label)
    engine.reset(session)
    return {
        'label': label,
        'warmup_s': warmup_s,
        'first_chunk_s': first_chunk_s,
        'chunks': chunks,
        'summary': summarise(chunks),
        'peak_memory_gib': peak,
        'resident_gib': resident_gib,
        'actions': actions,
        'motion_rms': motion,
    }


def profile_chunk(infer: Any, device: torch.device, path: str, label: str) -> None:
    """Run one more chunk under torch.profiler and append its kernel table to ``path``."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device.type == 'cuda':
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        infer()
    sort = 'cuda_time_total' if device.type == 'cuda' else 'cpu_time_total'
    table = prof.key_averages().table(sort_by=sort, row_limit=60, max_name_column_width=90)
    classes = class_table(prof, label='in the chunk') if device.type == 'cuda' else ''
    print(f'\n[{label}] profiled chunk\n{classes}')
    with open(path, 'a') as handle:
        handle.write(f'\n===== {label}: one chunk =====\n{classes}\n{table}\n')


def summarise(chunks: list[dict]) -> dict:
    """Mean timings of new-window and continuing chunks and over a window cycle."""
    summary = {}
    for name, group in (
        ('new_window', [c for c in chunks if c['new_window']]),
        ('continuing', [c for c in chunks if not c['new_window']]),
        ('all', chunks),
    ):
        if group:
            summary[name] = {
                key: statistics.fmean(c[key] for c in group)
                for key in (
                    *('inputs', 'encode', 'prefill', 'denoise', 'decode', 'total'),
                    *('tflops', 'tflop'),
                )
            }
            summary[name]['dit_calls'] = statistics.fmean(c['dit_calls'] for c in group)
            similarities = [s for c in group for s in c['step_similarities']]
            if similarities:
                summary[name]['similarity_mean'] = statistics.fmean(similarities)
                summary[name]['similarity_max'] = max(similarities)
            summary[name]['count'] = len(group)
    totals = [c['total'] for c in chunks]
    if totals:
        summary['all']['p99'] = float(np.percentile(totals, 99))
        summary['all']['max'] = max(totals)
    return summary
