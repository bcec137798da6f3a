# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Smoke test of benchmarks/engine_benchmark.py on the CPU with the tiny preset."""

import json
from pathlib import Path
import subprocess
import sys

from dreamzero_ros.engine import EngineConfig

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'benchmarks'))

import engine_benchmark  # noqa: E402


def test_benchmark_runs_on_cpu_tiny(tmp_path):
    out = tmp_path / 'bench.json'
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / 'benchmarks' / 'engine_benchmark.py'),
            '--preset',
            'tiny',
            '--device',
            'cpu',
            '--dtype',
            'float32',
            '--threads',
            '1',
            '--warmup',
            '1',
            '--repeats',
            '2',
            '--step-cache',
            'static',
            'full',
            '--json',
            str(out),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert 'continuing' in result.stdout and 'x baseline' in result.stdout
    report = json.loads(out.read_text())
    static, full = report['results']
    assert [c['dit_calls'] for c in static['chunks']] == [8, 8]
    assert [c['dit_calls'] for c in full['chunks']] == [16, 16]
    for chunk in static['chunks']:
        assert chunk['total'] >= chunk['denoise'] > 0 and chunk['tflop'] > 0


def test_flop_count_of_the_14b_denoising_call():
    dit = EngineConfig.droid_14b().dit
    shape = engine_benchmark.CallShape(video_frames=2, registers=25, cached_frames=7)
    flops = engine_benchmark.dit_call_flops(dit, shape, text_tokens=512, image_tokens=257)
    # 1785 queries over 7945 keys, 40 blocks of dim 5120 / FFN 13824: ~55 TFLOP per CFG row.
    d, q, k = 5120, 1785, 7945
    by_hand = 40 * q * (12 * d * d + 4 * k * d + 4 * 769 * d + 4 * d * 13824)
    assert abs(flops - by_hand) / by_hand < 0.01
    assert 54e12 < flops < 57e12


def test_benchmark_compares_speed_variants(tmp_path):
    out = tmp_path / 'variants.json'
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / 'benchmarks' / 'engine_benchmark.py'),
            '--preset',
            'tiny',
            '--device',
            'cpu',
            '--threads',
            '1',
            '--warmup',
            '1',
            '--repeats',
            '2',
            '--variants',
            'eager',
            'attention',
            'f8:fp8_linear=rowwise,attention_backend=math',
            '--attention',
            'flash',
            '--json',
            str(out),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert 'variant' in result.stdout and 'actions vs eager' in result.stdout
    eager, attention, fp8 = json.loads(out.read_text())['results']
    assert attention['settings'] == {'attention_backend': 'flash'}
    assert attention['action_diff']['reference'] == 'eager'
    assert 0 < fp8['action_diff']['max_abs'] < 0.05
    assert len(fp8['actions']) == 3 and len(fp8['actions'][0]) == 24
