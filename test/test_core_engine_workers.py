# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The node's CFG-parallel worker ranks: devices, rendezvous ports, failing fast, stopping."""

import threading
import time

import pytest

from dreamzero_ros.core.engine_workers import EngineWorkers, WorkerStartError, plan_workers
from dreamzero_ros.core.node_config import EngineSettings


def _engine(**values) -> EngineSettings:
    return EngineSettings(**{'cfg_parallel': 2, 'checkpoint': '/ckpt', **values})


@pytest.mark.parametrize(
    ('values', 'device', 'env'),
    [
        ({'device': 'cpu'}, 'cpu', {}),
        ({'device': 'cuda:1'}, 'cuda:2', {}),
        ({'device': 'cuda'}, 'cuda:1', {}),
        ({'device': 'cuda:0', 'worker_gpus': ' 5 '}, 'cuda:0', {'CUDA_VISIBLE_DEVICES': '5'}),
    ],
)
def test_worker_devices(values, device, env):
    (worker,) = plan_workers(_engine(**values))
    assert (worker.rank, worker.device, worker.env) == (1, device, env)


def test_worker_gpus_must_name_one_gpu_per_worker():
    with pytest.raises(ValueError, match='names 2 GPUs for 1 worker'):
        plan_workers(_engine(worker_gpus='1,2'))


def test_a_worker_that_cannot_load_fails_the_start_at_once(tmp_path):
    workers = EngineWorkers(_engine(checkpoint=str(tmp_path / 'missing')), log=lambda text: None)
    start = time.monotonic()
    with pytest.raises(WorkerStartError, match='rank 1 exited with status 1 before it had loaded'):
        workers.start()
    assert time.monotonic() - start < 60  # not the 600 s join timeout
    assert workers.processes == []


def test_a_stop_request_ends_the_wait_and_the_workers(tmp_path):
    from dreamzero_ros.engine.random_checkpoint import write_random_checkpoint

    checkpoint = write_random_checkpoint(tmp_path / 'tiny', preset='tiny')
    stop = threading.Event()
    workers = EngineWorkers(_engine(checkpoint=str(checkpoint)), lambda text: None, stop.is_set)
    threading.Timer(0.5, stop.set).start()
    with pytest.raises(WorkerStartError, match='stop requested'):
        workers.start()
    assert workers.processes == []


def test_two_groups_on_one_host_get_their_own_ports():
    first, second = EngineWorkers(_engine()), EngineWorkers(_engine())
    try:
        first._open_store()
        second._open_store()
        assert first.port != second.port and 0 not in (first.port, second.port)
    finally:
        first.close()
        second.close()
