# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""CFG parallel over gloo in two real processes gives the actions of the one-process batched run.

Rank 1 is the real ``dreamzero-engine-worker`` console script loading the same random checkpoint
(the real layout, written by ``write_random_checkpoint``); rank 0 is a spawned process running
``DreamZeroEngine`` with a :class:`CfgParallelDriver` layout.  The reference runs the same
observations through a batched-CFG engine in the test process.
"""

import multiprocessing
import os
from pathlib import Path
import subprocess
import traceback

import numpy as np
import pytest
import torch

from dreamzero_ros.engine import cfg_parallel
from dreamzero_ros.engine.pipeline import DreamZeroEngine
from dreamzero_ros.engine.testing import random_observation, write_random_checkpoint

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


def rank0(folder: str, port: int, result: str, worker_preset: str | None) -> None:
    """Rank 0 in its own process: the engine with the CFG-parallel driver."""
    torch.set_num_threads(1)
    try:
        driver = cfg_parallel.connect_driver('127.0.0.1', port, timeout_s=TIMEOUT_S)
        try:
            engine = DreamZeroEngine.from_pretrained(folder, dtype='float32', layout=driver)
            actions = [torch.from_numpy(a) for a in scenario(engine)]
            torch.save({'actions': actions}, result)
        finally:
            driver.shutdown()
            torch.distributed.destroy_process_group()
    except Exception as error:  # reported to the test through the result file
        report = {'error': f'{type(error).__name__}: {error}', 'tb': traceback.format_exc()}
        torch.save(report, result)


def run_pair(tmp_path: Path, folder: Path, worker_args: list[str]) -> tuple[dict, int, str]:
    port = cfg_parallel.free_port()
    worker = subprocess.Popen(
        [
            'dreamzero-engine-worker', '--device', 'cpu', '--dtype', 'float32',
            '--timeout', str(TIMEOUT_S), *worker_args,
        ],
        env={
            **os.environ,
            'MASTER_ADDR': '127.0.0.1',
            'MASTER_PORT': str(port),
            'RANK': '1',
            'WORLD_SIZE': '2',
            'OMP_NUM_THREADS': '1',
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    result = tmp_path / 'rank0.pt'
    process = multiprocessing.get_context('spawn').Process(
        target=rank0, args=(str(folder), port, str(result), None)
    )
    process.start()
    try:
        process.join(TIMEOUT_S)
        output, _ = worker.communicate(timeout=TIMEOUT_S)
    finally:
        if process.is_alive():
            process.kill()
        if worker.poll() is None:
            worker.kill()
    return torch.load(result), worker.returncode, output


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    return write_random_checkpoint(tmp_path_factory.mktemp('ckpt'), 'tiny', seed=3, dtype='float32')


def test_cfg_parallel_actions_equal_batched_run(tmp_path, checkpoint):
    result, returncode, output = run_pair(tmp_path, checkpoint, ['--checkpoint', str(checkpoint)])
    assert 'error' not in result, result.get('tb')
    assert returncode == 0, output
    assert '10 chunks, shut down' in output
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        reference = scenario(DreamZeroEngine.from_pretrained(checkpoint, dtype='float32'))
    finally:
        torch.set_num_threads(previous)
    parallel = result['actions']
    assert len(parallel) == len(reference) == 10
    for got, want in zip(parallel, reference, strict=True):
        assert got.shape == (24, 8)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)
    # The chunks differ from each other: the comparison is not between constants.
    assert not np.allclose(reference[0], reference[1])


def test_worker_with_another_model_is_refused(tmp_path, checkpoint):
    result, returncode, output = run_pair(
        tmp_path, checkpoint, ['--random-weights', '0', '--preset', 'small']
    )
    assert 'CfgParallelError' in result.get('error', ''), result
    assert 'DiT config' in result['error']
    assert returncode != 0
    assert 'CfgParallelError' in output


def test_worker_cli_rejects_rank_zero(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cfg_parallel.main(['--rank', '0', '--random-weights', '0'])
    assert exit_info.value.code == 2
    assert 'rank 0 is the engine' in capsys.readouterr().err
