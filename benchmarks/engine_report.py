# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Comparisons of the variants' actions and the printed summaries and table."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from dreamzero_ros.engine.config import EngineConfig


def action_difference(result: dict, reference: dict) -> dict:
    """Differences of two variants' actions over the same chunks (joint units: rad)."""
    a = np.asarray(result['actions'], dtype=np.float64)
    b = np.asarray(reference['actions'], dtype=np.float64)
    count = min(len(a), len(b))
    delta = a[:count] - b[:count]
    rms = float(np.sqrt(np.mean(delta**2)))
    motion = float(np.sqrt(np.mean(np.square(reference['motion_rms'][:count]))))
    return {
        'reference': reference['label'],
        'chunks': count,
        'max_abs': float(np.abs(delta).max()),
        'rms': rms,
        'rms_over_motion': rms / motion if motion else math.nan,
    }


def compare_actions(results: list[dict], configs: list[EngineConfig]) -> None:
    """Attach ``action_diff`` (and ``action_diff_fp8`` for FP8 variants) to each result.

    ``action_diff`` compares with the first variant of the same step-cache mode,
    ``action_diff_fp8`` with the variant that differs only in ``fp8_linear``.
    """
    for index, (result, config) in enumerate(zip(results, configs, strict=True)):
        for earlier in range(index):
            if configs[earlier].options.step_cache == config.options.step_cache:
                result['action_diff'] = action_difference(result, results[earlier])
                break
        if config.options.fp8_linear == 'off':
            continue
        off = config.replace(options=dataclasses.replace(config.options, fp8_linear='off'))
        for earlier in range(index):
            if configs[earlier] == off:
                result['action_diff_fp8'] = action_difference(result, results[earlier])
                break


def print_summary(result: dict, baseline: dict | None) -> None:
    """One line per chunk kind, plus the ratio of the mean total to the baseline's."""
    print(
        f'[{result["label"]}] peak memory {result["peak_memory_gib"]:.2f} GiB '
        f'(resident before the variant {result["resident_gib"]:.2f} GiB), '
        f'warm-up {result["warmup_s"]:.1f} s, first chunk {result["first_chunk_s"]:.1f} s'
    )
    for name, values in result['summary'].items():
        line = (
            f'[{result["label"]}] {name:>10} x{values["count"]}: total {values["total"]:.1f} ms '
            f'(inputs {values["inputs"]:.1f}, encode {values["encode"]:.1f}, '
            f'prefill {values["prefill"]:.1f}, '
            f'denoise {values["denoise"]:.1f}, decode {values["decode"]:.1f}), '
            f'{values["dit_calls"]:.2g} DiT calls, DiT {values["tflops"]:.3g} TFLOP/s'
        )
        if 'similarity_mean' in values:
            line += (
                f', step-cache similarity mean {values["similarity_mean"]:.3f} '
                f'max {values["similarity_max"]:.3f}'
            )
        if 'p99' in values:
            line += f', p99 {values["p99"]:.1f} ms, max {values["max"]:.1f} ms'
        if baseline is not None and name in baseline['summary']:
            line += f', {values["total"] / baseline["summary"][name]["total"]:.2f}x baseline'
        print(line)
    seen = set()
    for key in ('action_diff', 'action_diff_fp8'):
        diff = result.get(key)
        if diff and diff['reference'] not in seen:
            seen.add(diff['reference'])
            print(
                f'[{result["label"]}] actions vs {diff["reference"]} over {diff["chunks"]} chunks: '
                f'max |d| {diff["max_abs"]:.3g}, rms {diff["rms"]:.3g} '
                f'({diff["rms_over_motion"]:.3g} of the predicted motion)'
            )


def print_table(results: list[dict]) -> None:
    """A compact comparison of the variants (means over the timed chunks).

    ``other``: the part of ``total`` outside the timed stages (Python, session bookkeeping).
    ``d act``: the action difference from the FP8 twin, else from the first variant of the same
    step-cache mode (rms and max, rad).
    """
    print(
        f'\n{"variant":<16}{"dit":>4}{"inputs":>7}{"encode":>8}{"prefill":>8}{"denoise":>9}'
        f'{"decode":>7}{"other":>6}{"total":>8}{"ratio":>7}{"TFLOP/s":>8}{"peak":>6}{"warm":>6}'
        f'{"1st":>6}{"d act":>9}{"max":>8}\n{"":<16}{"":>4}{"ms":>7}{"ms":>8}{"ms":>8}{"ms":>9}'
        f'{"ms":>7}{"ms":>6}{"ms":>8}{"":>7}{"DiT":>8}{"GiB":>6}{"s":>6}{"s":>6}{"rms":>9}{"":>8}'
    )
    base = results[0]['summary']['all']['total']
    for result in results:
        a = result['summary']['all']
        parts = sum(a[key] for key in ('inputs', 'encode', 'prefill', 'denoise', 'decode'))
        diff = result.get('action_diff_fp8') or result.get('action_diff')
        print(
            f'{result["label"]:<16}{a["dit_calls"]:>4.2g}{a["inputs"]:>7.1f}{a["encode"]:>8.1f}'
            f'{a["prefill"]:>8.1f}{a["denoise"]:>9.1f}{a["decode"]:>7.1f}'
            f'{a["total"] - parts:>6.1f}{a["total"]:>8.1f}{a["total"] / base:>7.3f}'
            f'{a["tflops"]:>8.0f}{result["peak_memory_gib"]:>6.1f}{result["warmup_s"]:>6.1f}'
            f'{result["first_chunk_s"]:>6.1f}{(diff["rms"] if diff else 0.0):>9.2g}'
            f'{(diff["max_abs"] if diff else 0.0):>8.2g}'
        )
