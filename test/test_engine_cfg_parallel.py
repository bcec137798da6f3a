# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""CFG / tensor parallel over gloo in real processes gives the actions of the one-process run.

Rank 1 is the real ``dreamzero-engine-worker`` console script loading the same random checkpoint
(the real layout, written by ``write_random_checkpoint``); rank 0 is a spawned process running
``DreamZeroEngine`` with a :class:`ParallelDriver` layout.  The reference runs the same
observations through a batched-CFG engine in the test process.  Grids: CFG 2 (2 ranks), tensor
parallel 2 with batched CFG (2 ranks), CFG 2 x TP 2 (4 ranks).
"""

import multiprocessing
import os
from pathlib import Path
import subprocess
import traceback

import numpy as np
import pytest
from script_paths import installed_script
import torch

from dreamzero_ros.engine import cfg_parallel
from dreamzero_ros.engine.pipeline import DreamZeroEngine
from dreamzero_ros.engine.random_checkpoint import write_random_checkpoint
from dreamzero_ros.engine.synthetic_droid import random_observation

TIMEOUT_S = 240


def scenario(engine) -> list[np.ndarray]:
    """Two interleaved sessions, a window roll-over, a reset and a prompt change."""
    actions = []
    for step in range(6):
        obs = random_observation(seed=step, session_id='a', stamp=step)
        actions.append(engine.infer(obs).actions)
        if step in (1, 3):
            other = random_observation(seed=100 + step, session_id='b', prompt='open the drawer')
            actions.append(engine.infer(other).actions)
    engine.reset('a')
    actions.append(engine.infer(random_observation(seed=50, session_id='a')).actions)
    prompt_change = random_observation(seed=51, session_id='a', prompt='wave the arm')
    actions.append(engine.infer(prompt_change).actions)
    return actions


def rank0(
    folder: str, port: int, world_size: int, tp_size: int, result: str, settings: dict
) -> None:
    """Rank 0 in its own process: the engine with the parallel driver as its layout."""
    torch.set_num_threads(1)
    try:
        driver = cfg_parallel.connect_driver(
            '127.0.0.1', port, world_size=world_size, tp_size=tp_size, timeout_s=TIMEOUT_S
        )
        try:
            engine = DreamZeroEngine.from_pretrained(
                folder, dtype='float32', layout=driver, **settings
            )
            actions = [torch.from_numpy(a) for a in scenario(engine)]
            torch.save(
                {
                    'actions': actions,
                    'local_heads': engine.modules.dit.blocks[0].self_attn.num_heads,
                },
                result,
            )
        finally:
            driver.shutdown()
            torch.distributed.destroy_process_group()
    except Exception as error:  # reported to the test through the result file
        report = {'error': f'{type(error).__name__}: {error}', 'tb': traceback.format_exc()}
        torch.save(report, result)


def run_group(
    tmp_path: Path,
    folder: Path,
    worker_args: list[str],
    world_size: int = 2,
    tp_size: int = 1,
    settings: dict | None = None,
) -> tuple[dict, list[int], list[str]]:
    """Rank 0 in a spawned process, ranks 1.. as dreamzero-engine-worker processes."""
    port = cfg_parallel.free_port()
    workers = [
        subprocess.Popen(
            [
                installed_script('dreamzero-engine-worker'),
                '--device', 'cpu', '--dtype', 'float32',
                '--timeout', str(TIMEOUT_S), *worker_args,
            ],
            env={
                **os.environ,
                'MASTER_ADDR': '127.0.0.1',
                'MASTER_PORT': str(port),
                'RANK': str(rank),
                'WORLD_SIZE': str(world_size),
                'OMP_NUM_THREADS': '1',
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(1, world_size)
    ]  # fmt: skip
    result = tmp_path / 'rank0.pt'
    process = multiprocessing.get_context('spawn').Process(
        target=rank0, args=(str(folder), port, world_size, tp_size, str(result), settings or {})
    )
    process.start()
    outputs = []
    try:
        process.join(TIMEOUT_S)
        for worker in workers:
            outputs.append(worker.communicate(timeout=TIMEOUT_S)[0])
    finally:
        if process.is_alive():
            process.kill()
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    return torch.load(result), [w.returncode for w in workers], outputs


@pytest.fixture(scope='module')
def reference(checkpoint):
    return scenario(DreamZeroEngine.from_pretrained(checkpoint, dtype='float32'))


def assert_same_actions(parallel: list[torch.Tensor], reference: list[np.ndarray]) -> None:
    assert len(parallel) == len(reference) == 10
    for got, want in zip(parallel, reference, strict=True):
        assert got.shape == (24, 8)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)
    # The chunks differ from each other: the comparison is not between constants.
    assert not np.allclose(reference[0], reference[1])


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


def test_cfg_parallel_worker_follows_the_speed_options(tmp_path, checkpoint, reference):
    # The workers get rank 0's sampling config, speed options included: here the fast block
    # runner with dynamo tracing only (exact in float32).
    result, codes, outputs = run_group(
        tmp_path, checkpoint, ['--checkpoint', str(checkpoint)], settings={'compile': 'eager'}
    )
    assert 'error' not in result, result.get('tb')
    assert codes == [0], outputs
    assert_same_actions(result['actions'], reference)


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
    result, codes, outputs = run_group(
        tmp_path, checkpoint, ['--random-weights', '0', '--preset', 'small']
    )
    assert 'CfgParallelError' in result.get('error', ''), result
    assert 'rank 1: DiT config' in result['error']
    assert codes != [0]
    assert 'CfgParallelError' in outputs[0]


def test_worker_cli_rejects_rank_zero(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cfg_parallel.main(['--rank', '0', '--random-weights', '0'])
    assert exit_info.value.code == 2
    assert 'rank 0 is the engine' in capsys.readouterr().err
