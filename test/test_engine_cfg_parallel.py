# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""CFG / tensor parallel over gloo in real processes gives the actions of the one-process run.

Rank 1 is the real ``dreamzero-engine-worker`` console script loading the same random checkpoint
(the real layout, written by ``write_random_checkpoint``); rank 0 is a spawned process running
``DreamZeroEngine`` with a :class:`ParallelDriver` layout.  The reference runs the same
observations through a batched-CFG engine in the test process.  Grids: CFG 2 (2 ranks), tensor
parallel 2 with batched CFG (2 ranks), CFG 2 x TP 2 (4 ranks).
"""

from cfg_parallel_support import assert_same_actions, run_group, scenario
import pytest

from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.engine.pipeline.engine import DreamZeroEngine
from dreamzero_ros.engine.workers import worker

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini


@pytest.fixture(scope='module')
def reference(checkpoint):
    return scenario(DreamZeroEngine.from_pretrained(checkpoint, EngineOptions(dtype='float32')))


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    return write_random_checkpoint(tmp_path_factory.mktemp('ckpt'), 'tiny', seed=3, dtype='float32')


def test_cfg_parallel_actions_equal_batched_run(tmp_path, checkpoint, reference):
    result, codes, outputs = run_group(tmp_path, checkpoint, ['--checkpoint', str(checkpoint)])
    assert 'error' not in result, result.get('tb')
    assert codes == [0], outputs
    assert '10 chunks, shut down' in outputs[0]
    assert result['local_heads'] == 2
    assert_same_actions(result['actions'], reference)


def test_cfg_parallel_worker_runs_with_the_speed_options(tmp_path, checkpoint, reference):
    # The workers run with their options (rank 0's, on their command line) and rank 0's sampling
    # and compile backend: here the transformed blocks compiled with dynamo tracing only (exact
    # in float32).
    result, codes, outputs = run_group(
        tmp_path,
        checkpoint,
        ['--checkpoint', str(checkpoint), '--compile'],
        options={'compile': True},
        changes={'compile_backend': 'eager'},
    )
    assert 'error' not in result, result.get('tb')
    assert codes == [0], outputs
    assert_same_actions(result['actions'], reference)


def test_worker_with_other_options_is_refused(tmp_path, checkpoint):
    result, codes, outputs = run_group(
        tmp_path,
        checkpoint,
        ['--checkpoint', str(checkpoint), '--kv-cache', 'fp8'],
        options={'compile': True},
    )
    assert 'CfgParallelError' in result.get('error', ''), result
    assert (
        'rank 1: engine options differ from rank 0: compile False (rank 0: True), '
        "kv_cache 'fp8' (rank 0: 'model')"
    ) in result['error']
    assert codes != [0]


def test_tensor_parallel_with_batched_cfg_equals_one_process(tmp_path, checkpoint, reference):
    result, codes, outputs = run_group(
        tmp_path, checkpoint, ['--checkpoint', str(checkpoint)], world_size=2, tp_size=2
    )
    assert 'error' not in result, result.get('tb')
    assert codes == [0], outputs
    assert result['local_heads'] == 1  # 2 heads split over 2 ranks
    assert_same_actions(result['actions'], reference)


@pytest.mark.slow  # four processes on two cores
def test_cfg_parallel_times_tensor_parallel_on_four_ranks(tmp_path, checkpoint, reference):
    result, codes, outputs = run_group(
        tmp_path, checkpoint, ['--checkpoint', str(checkpoint)], world_size=4, tp_size=2
    )
    assert 'error' not in result, result.get('tb')
    assert codes == [0, 0, 0], outputs
    assert all('10 chunks, shut down' in out for out in outputs)
    assert_same_actions(result['actions'], reference)


def test_worker_with_another_model_is_refused(tmp_path, checkpoint):
    result, codes, outputs = run_group(tmp_path, checkpoint, ['--preset', 'small', '--seed', '0'])
    assert 'CfgParallelError' in result.get('error', ''), result
    assert 'rank 1: DiT config' in result['error']
    assert codes != [0]
    assert 'CfgParallelError' in outputs[0]


def test_worker_cli_rejects_rank_zero(capsys):
    with pytest.raises(SystemExit) as exit_info:
        worker.main(['--rank', '0', '--preset', 'tiny'])
    assert exit_info.value.code == 2
    assert 'rank 0 is the engine' in capsys.readouterr().err
