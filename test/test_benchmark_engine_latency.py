# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""benchmarks/engine_benchmark.py on the CPU with the tiny preset: variants, FLOPs, torchrun.

The CFG-parallel mode runs under the real ``torchrun`` with two ranks over gloo and is held to
the actions of the one-process run.
"""

import json
import os
from pathlib import Path
import subprocess
import sys

import numpy as np
import pytest

from dreamzero_ros.engine import EngineConfig

ROOT = Path(__file__).resolve().parents[1]
BENCHMARK = str(ROOT / 'benchmarks' / 'engine_benchmark.py')
TINY_CPU = ('--preset', 'tiny', '--device', 'cpu', '--num-threads', '1', '--warmup', '1')
sys.path.insert(0, str(ROOT / 'benchmarks'))

import engine_flops  # noqa: E402

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini


def _run(command: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, 'OMP_NUM_THREADS': '1'},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def test_step_cache_modes_are_timed_and_compared(tmp_path):
    out = tmp_path / 'bench.json'
    result = _run(
        [sys.executable, BENCHMARK, *TINY_CPU, '--dtype', 'float32', '--repeats', '2']
        + ['--step-cache', 'static', 'full', '--json', str(out)]
    )
    assert 'continuing' in result.stdout and 'x baseline' in result.stdout
    static, full = json.loads(out.read_text())['results']
    assert [c['dit_calls'] for c in static['chunks']] == [8, 8]
    assert [c['dit_calls'] for c in full['chunks']] == [16, 16]
    for chunk in static['chunks']:
        assert chunk['total'] >= chunk['denoise'] > 0 and chunk['tflop'] > 0


def test_flop_count_of_the_14b_denoising_call():
    dit = EngineConfig.droid_14b().dit
    shape = engine_flops.CallShape(video_frames=2, registers=25, cached_frames=7)
    flops = engine_flops.dit_call_flops(dit, shape, text_tokens=512, image_tokens=257)
    # 1785 queries over 7945 keys, 40 blocks of dim 5120 / FFN 13824: ~55 TFLOP per CFG row.
    d, q, k = 5120, 1785, 7945
    by_hand = 40 * q * (12 * d * d + 4 * k * d + 4 * 769 * d + 4 * d * 13824)
    assert abs(flops - by_hand) / by_hand < 0.01
    assert 54e12 < flops < 57e12


def test_speed_variants_and_view_preparation_are_compared(tmp_path):
    out = tmp_path / 'variants.json'
    result = _run(
        [sys.executable, BENCHMARK, *TINY_CPU, '--repeats', '2', '--inputs', '--gelu']
        + ['--dtype', 'bfloat16']  # FP8 linears need it (auto: float32 on the CPU)
        + ['--variants', 'eager', 'attention', 'f8:fp8_linear=rowwise,attention_backend=math']
        + ['--attention', 'flash', '--json', str(out)]
    )
    assert 'variant' in result.stdout and 'actions vs eager' in result.stdout
    assert 'view preparation' in result.stdout
    report = json.loads(out.read_text())
    eager, attention, fp8 = report['results']
    assert attention['settings'] == {'attention_backend': 'flash'}
    assert attention['action_diff']['reference'] == 'eager'
    assert 0 < fp8['action_diff']['max_abs'] < 0.05
    assert len(fp8['actions']) == 3 and len(fp8['actions'][0]) == 24
    assert all(chunk['inputs'] > 0 for chunk in eager['chunks'])
    agreement = report['inputs']['agreement']
    assert all(row['differing'] == 0 for row in agreement.values())  # host == "device" (CPU)
    # Two runs' files compare variant by variant (here a run with itself).
    compare = _run([sys.executable, str(ROOT / 'benchmarks' / 'compare_actions.py'), out, out])
    assert '[f8] actions over 3 chunks: rms 0.000e+00, max 0.000e+00' in compare.stdout
    assert '[eager]        all: A ' in compare.stdout and 'B/A 1.000' in compare.stdout


@pytest.mark.parametrize(
    ('parallel_args', 'mode', 'worker'),
    [
        ([], 'CFG parallel (2 ranks)', 'rank 1: 4 chunks of the unconditional branch'),
        (
            ['--tensor-parallel', '2'],
            '2 CFG row(s) batched, tensor parallel 2 (2 ranks',
            'rank 1: 4 chunks of both CFG rows, shard 1 of 2',
        ),
    ],
)
def test_torchrun_parallel_modes_give_the_one_process_actions(
    tmp_path, parallel_args, mode, worker
):
    args = [*TINY_CPU, '--dtype', 'float32', '--repeats', '3']
    parallel, single = tmp_path / 'parallel.json', tmp_path / 'single.json'
    torchrun = str(Path(sys.executable).with_name('torchrun'))
    result = _run(
        [torchrun, '--standalone', '--nproc_per_node', '2', BENCHMARK, *args, *parallel_args]
        + ['--json', str(parallel)]
    )
    assert mode in result.stdout
    assert worker in result.stdout
    _run([sys.executable, BENCHMARK, *args, '--json', str(single)])
    (two_ranks,) = json.loads(parallel.read_text())['results']
    (one_process,) = json.loads(single.read_text())['results']
    assert [c['new_window'] for c in two_ranks['chunks']] == [False, True, False]
    got, want = np.asarray(two_ranks['actions']), np.asarray(one_process['actions'])
    assert got.shape == want.shape == (4, 24, 8)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert not np.allclose(want[0], want[1])
