# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The node's engine worker ranks: devices, rendezvous ports, failing fast, stopping."""

import threading
import time

import pytest

from dreamzero_ros.core.engine_workers import (
    EngineRanks,
    EngineWorkers,
    WorkerStartError,
    load_on_ranks,
    plan_workers,
    worker_command,
)
from dreamzero_ros.core.node_config import build_settings


def _ranks(**values) -> EngineRanks:
    return EngineRanks(**{'cfg_parallel': 2, 'checkpoint': '/ckpt', **values})


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
    (worker,) = plan_workers(_ranks(**values), cuda_devices=4)
    assert (worker.rank, worker.device, worker.env) == (1, device, env)


def test_every_rank_of_cfg_times_tensor_parallel_gets_its_own_device():
    ranks = _ranks(tensor_parallel=2, device='cuda:0')
    assert ranks.world_size == 4
    workers = plan_workers(ranks, cuda_devices=4)
    assert [(w.rank, w.device) for w in workers] == [(1, 'cuda:1'), (2, 'cuda:2'), (3, 'cuda:3')]
    named = plan_workers(
        _ranks(cfg_parallel=1, tensor_parallel=2, worker_gpus='3', device='cuda'), 1
    )
    assert [(w.device, w.env) for w in named] == [('cuda:0', {'CUDA_VISIBLE_DEVICES': '3'})]
    on_cpu = plan_workers(_ranks(tensor_parallel=2), cuda_devices=0)
    assert [w.device for w in on_cpu] == ['cpu'] * 3


@pytest.mark.parametrize(
    ('values', 'cuda_devices', 'message'),
    [
        (
            {'worker_gpus': '1,2'},
            4,
            r'names 2 GPU\(s\) for 1 worker rank\(s\) \(cfg_parallel 2 x tensor_parallel 1',
        ),
        (
            {'cfg_parallel': 1, 'tensor_parallel': 4, 'worker_gpus': '1,2', 'device': 'cuda'},
            4,
            'names 2 GPU',
        ),
        (
            {'cfg_parallel': 1, 'tensor_parallel': 2, 'device': 'cuda:0'},
            1,
            r'= 2 ranks need one GPU each, cuda:0 \.\. cuda:1, but 1 CUDA device\(s\) are visible',
        ),
        ({'tensor_parallel': 2, 'device': 'cuda:1'}, 4, r'cuda:1 \.\. cuda:4, but 4'),
        ({'worker_gpus': '1'}, 4, "worker_gpus names GPUs but rank 0 runs on 'cpu'"),
    ],
)
def test_ranks_without_their_devices_are_refused(values, cuda_devices, message):
    with pytest.raises(ValueError, match=message):
        plan_workers(_ranks(**values), cuda_devices)


def test_ranks_of_the_node_parameters():
    settings = build_settings(
        {'engine.checkpoint': '/c', 'engine.tensor_parallel': 2, 'engine.device': 'cuda:1'}
    )
    ranks = EngineRanks.of(settings.engine)
    assert (ranks.checkpoint, ranks.device, ranks.world_size) == ('/c', 'cuda:1', 2)
    assert ranks.describe() == 'cfg_parallel 1 x tensor_parallel 2 = 2 ranks'
    with pytest.raises(ValueError, match='= 2 ranks need a checkpoint'):
        EngineRanks(checkpoint='', tensor_parallel=2)


def test_one_rank_loads_in_this_process_only():
    assert load_on_ranks(EngineRanks(checkpoint=''), lambda layout: ('engine', layout)) == (
        ('engine', None),
        None,
    )


def test_missing_gpus_are_refused_before_anything_starts():
    # This machine has no CUDA device: two CUDA ranks cannot be placed.
    workers = EngineWorkers(_ranks(cfg_parallel=1, tensor_parallel=2, device='cuda:0'))
    with pytest.raises(ValueError, match='0 CUDA device'):
        workers.start()
    assert workers.processes == [] and workers.port == 0


def test_a_worker_that_cannot_load_fails_the_start_at_once(tmp_path):
    workers = EngineWorkers(
        _ranks(cfg_parallel=1, tensor_parallel=2, checkpoint=str(tmp_path / 'missing')),
        log=lambda text: None,
    )
    start = time.monotonic()
    with pytest.raises(WorkerStartError, match='rank 1 exited with status 1 before it had loaded'):
        workers.start()
    assert time.monotonic() - start < 60  # not the 600 s join timeout
    assert workers.processes == []


def test_a_stop_request_ends_the_wait_and_the_workers(tmp_path):
    from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint

    checkpoint = write_random_checkpoint(tmp_path / 'tiny', preset='tiny')
    stop = threading.Event()
    workers = EngineWorkers(_ranks(checkpoint=str(checkpoint)), lambda text: None, stop.is_set)
    threading.Timer(0.5, stop.set).start()
    with pytest.raises(WorkerStartError, match='stop requested'):
        workers.start()
    assert workers.processes == []


def test_two_groups_on_one_host_get_their_own_ports():
    first, second = EngineWorkers(_ranks()), EngineWorkers(_ranks())
    try:
        first._open_store()
        second._open_store()
        assert first.port != second.port and 0 not in (first.port, second.port)
    finally:
        first.close()
        second.close()


def test_workers_build_their_dit_as_rank_0_does_fp8_and_shard():
    (worker,) = plan_workers(_ranks(device='cpu'), 0)
    plain = worker_command(_ranks(device='cpu'), worker)
    assert '--fp8-linear' not in plain and '--tensor-parallel' not in plain
    ranks = _ranks(cfg_parallel=1, tensor_parallel=2, fp8_linear='rowwise')
    command = worker_command(ranks, worker)
    assert command[command.index('--fp8-linear') + 1] == 'rowwise'
    assert command[command.index('--tensor-parallel') + 1] == '2'
