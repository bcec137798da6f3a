# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The engine's worker ranks: devices, rendezvous ports, failing fast, stopping, options."""

import threading
import time

import pytest

from dreamzero_ros.core.config.node_config import build_settings
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.engine.workers.launch import (
    EngineRanks,
    EngineWorkers,
    load_on_ranks,
    plan_workers,
    worker_command,
)
from dreamzero_ros.engine.workers.worker import build_parser
from dreamzero_ros.errors import DreamZeroError, WorkerStartError


def _ranks(checkpoint='/ckpt', **values) -> EngineRanks:
    options = EngineOptions(**{'cfg_parallel': 2, 'device': 'cpu', 'dtype': 'float32', **values})
    return EngineRanks(checkpoint, options)


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
        (
            {'device': 'cuda:0', 'worker_gpus': '1'},
            0,
            r'rank 0 of cfg_parallel 2 x tensor_parallel 1 = 2 ranks runs on cuda:0, but 0 CUDA',
        ),
    ],
)
def test_ranks_without_their_devices_are_refused(values, cuda_devices, message):
    with pytest.raises(ValueError, match=message):
        plan_workers(_ranks(**values), cuda_devices)


def test_ranks_of_the_node_parameters():
    engine = build_settings(
        {'engine.checkpoint': '/c', 'engine.tensor_parallel': 2, 'engine.device': 'cuda:1'}
    ).engine
    ranks = EngineRanks(engine.checkpoint, engine)  # the node's settings are the options
    assert (ranks.checkpoint, ranks.options.device, ranks.world_size) == ('/c', 'cuda:1', 2)
    assert ranks.describe() == 'cfg_parallel 1 x tensor_parallel 2 = 2 ranks'
    with pytest.raises(ValueError, match='= 2 ranks need a checkpoint'):
        EngineRanks('', EngineOptions(tensor_parallel=2))


def test_one_rank_loads_in_this_process_only():
    assert load_on_ranks(EngineRanks(''), lambda layout: ('engine', layout)) == (
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
        _ranks(str(tmp_path / 'missing'), cfg_parallel=1, tensor_parallel=2),
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
    workers = EngineWorkers(_ranks(str(checkpoint)), lambda text: None, stop.is_set)
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


def test_workers_get_every_option_of_rank_0_with_their_own_device():
    """The worker's command line reads back as rank 0's options, the worker's device aside."""
    engine = build_settings(
        {
            'engine.checkpoint': '/c',
            'engine.cfg_parallel': 2,
            'engine.device': 'cuda:1',
            'engine.dtype': 'bfloat16',
            'engine.fp8_linear': 'rowwise',
            'engine.compile': True,
            'engine.kv_cache': 'fp8',
            'engine.encoder_dir': '/enc',
            'engine.worker_timeout': 42.5,
        }
    ).engine
    ranks = EngineRanks(engine.checkpoint, engine)
    (worker,) = plan_workers(ranks, cuda_devices=4)
    command = worker_command(ranks, worker)
    assert command[1:3] == ['-m', 'dreamzero_ros.engine.workers.worker']
    args = build_parser().parse_args(command[3:])
    assert str(args.checkpoint) == '/c'
    received = EngineOptions.from_arguments(args)
    assert received.device == 'cuda:2'
    assert received.engine_fields() == {**engine.engine_fields(), 'device': 'cuda:2'}


def test_worker_start_error_is_one_of_the_package_errors():
    assert issubclass(WorkerStartError, DreamZeroError)
    assert issubclass(WorkerStartError, RuntimeError)
