# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A CFG / tensor-parallel group in real processes over gloo, and the observations it serves.

Rank 0 is a spawned process running ``DreamZeroEngine`` with a ``ParallelDriver`` layout; ranks
1.. are the real ``dreamzero-engine-worker`` console script.
"""

import multiprocessing
import os
from pathlib import Path
import subprocess
import traceback

import numpy as np
from script_paths import installed_script
import torch

from dreamzero_ros.engine.checkpoint.synthetic_droid import random_observation
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.engine.pipeline.engine import DreamZeroEngine
from dreamzero_ros.engine.workers.driver import connect_driver
from dreamzero_ros.engine.workers.protocol import free_port

TIMEOUT_S = 240


def scenario(engine, video: bool = False) -> list[np.ndarray]:
    """Two interleaved sessions, a window roll-over, a reset and a prompt change.

    ``video``: ask for the predicted video too (every DiT call then runs both CFG branches).
    """
    actions = []

    def infer(observation):
        actions.append(engine.infer(observation, return_video=video).actions)

    for step in range(6):
        infer(random_observation(seed=step, session_id='a', stamp=step))
        if step in (1, 3):
            infer(random_observation(seed=100 + step, session_id='b', prompt='open the drawer'))
    engine.reset('a')
    infer(random_observation(seed=50, session_id='a'))
    infer(random_observation(seed=51, session_id='a', prompt='wave the arm'))
    return actions


def rank0(
    folder: str,
    port: int,
    world_size: int,
    tp_size: int,
    result: str,
    options: dict,
    changes: dict,
) -> None:
    """Rank 0 in its own process: the engine with the parallel driver as its layout."""
    torch.set_num_threads(1)
    try:
        driver = connect_driver(
            '127.0.0.1', port, world_size=world_size, tp_size=tp_size, timeout_s=TIMEOUT_S
        )
        try:
            engine = DreamZeroEngine.from_pretrained(
                folder, EngineOptions(device='cpu', dtype='float32', **options), driver, **changes
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
    options: dict | None = None,
    changes: dict | None = None,
) -> tuple[dict, list[int], list[str]]:
    """Rank 0 in a spawned process, ranks 1.. as dreamzero-engine-worker processes.

    Rank 0 runs with ``options`` (engine options besides the CPU and float32) and ``changes``
    (other :class:`EngineConfig` fields); the workers with ``worker_args``.
    """
    port = free_port()
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
        target=rank0,
        args=(str(folder), port, world_size, tp_size, str(result), options or {}, changes or {}),
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


def assert_same_actions(parallel: list[torch.Tensor], reference: list[np.ndarray]) -> None:
    assert len(parallel) == len(reference) == 10
    for got, want in zip(parallel, reference, strict=True):
        assert got.shape == (24, 8)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)
    # The chunks differ from each other: the comparison is not between constants.
    assert not np.allclose(reference[0], reference[1])
