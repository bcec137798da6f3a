# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""QK RMSNorm + rotary embedding + K/V cache write as one Triton kernel, equal to the torch path.

The kernel runs under Triton's CPU interpreter here (a subprocess: Triton reads
``TRITON_INTERPRET`` when the kernel is defined); on the GPU the benchmark's ``--qk-rope``
compares it with the torch path.
"""

import json
import os
from pathlib import Path
import subprocess
import sys

import pytest
import torch

from dreamzero_ros.engine.speed import qk_rope_kernel

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope='module')
def interpreted():
    """The checks of ``qk_rope_support.py``, run under the Triton interpreter."""
    pytest.importorskip('triton')
    result = subprocess.run(
        [sys.executable, str(ROOT / 'test' / 'qk_rope_support.py')],
        env={**os.environ, 'TRITON_INTERPRET': '1'},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_kernel_computes_the_torch_path_in_float32(interpreted):
    checks = interpreted['float32']
    assert checks['q_shape'] == [2, 5, 3, 8]
    assert checks['q_max_abs'] < 2e-6 and checks['k_max_abs'] < 2e-6
    assert checks['v_equal'] and checks['outside_untouched']


def test_kernel_in_bfloat16_stays_within_rounding(interpreted):
    # The interpreter's float32 -> bfloat16 conversion does not round to nearest as the GPU
    # does (one or two steps more here); on the H200 the benchmark measured 2.4e-5 of the
    # values differing from eager torch, by one bf16 step.
    checks = interpreted['bfloat16']
    assert checks['q_max_abs'] <= 4 * 2**-7 * 4 and checks['k_max_abs'] <= 4 * 2**-7 * 4
    assert checks['v_equal'] and checks['outside_untouched']


@pytest.mark.parametrize('run', ['eager', 'inductor'])
def test_blocks_with_the_kernel_compute_the_reference_blocks(interpreted, run):
    checks = interpreted['runner'][run]
    assert checks['uses_kernel']
    assert checks['video_rel'] < 1e-5 and checks['action_rel'] < 1e-5
    assert checks['cache_k_max_abs'] < 1e-5 and checks['cache_v_max_abs'] < 1e-5


def test_kernel_op_passes_opcheck(interpreted):
    assert interpreted['opcheck'] and all(interpreted['opcheck'].values()), interpreted['opcheck']


def test_kernel_refuses_inputs_it_would_misread(interpreted):
    refusals = interpreted['refusals']
    assert 'contiguous' in refusals['strided_qkv']
    assert 'k_out must be a (1, 4, 2, 8)' in refusals['wrong_slot']
    assert 'cos/sin must be (4, 4)' in refusals['wrong_table']
    assert 'weight_q must be a contiguous (16,)' in refusals['wrong_weight']


def test_cpu_without_the_interpreter_keeps_the_torch_path():
    assert os.environ.get('TRITON_INTERPRET') != '1'  # this process imported the kernel compiled
    cpu = torch.device('cpu')
    assert not qk_rope_kernel.available(cpu)
    with pytest.raises(RuntimeError, match='cannot run on cpu'):
        qk_rope_kernel.qk_norm_rope_into_cache(
            torch.zeros(1, 1, 6), torch.ones(2), torch.ones(2), torch.ones(1, 1),
            torch.zeros(1, 1), 1, 1e-6, torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2),
        )  # fmt: skip
