# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Unit tests of what the launch file starts: node overrides and CFG-parallel worker ranks."""

from pathlib import Path

import pytest

from dreamzero_ros.core.launch_plan import WORKER_EXECUTABLE, parse_gpus, plan_launch
from dreamzero_ros.core.node_config import read_params_file

CONFIG = Path(__file__).resolve().parents[1] / 'config'


def test_droid_on_two_gpus_starts_one_worker_rank():
    plan = plan_launch(
        read_params_file(CONFIG / 'droid.yaml'),
        checkpoint='/data/DreamZero-DROID',
        gpus='2,3',
        cfg_parallel='2',
        dry_run='true',
        openpi_bridge='true',
        openpi_port='8123',
    )
    assert plan.node_parameters == {
        'use_sim_time': False,
        'engine.checkpoint': '/data/DreamZero-DROID',
        'engine.cfg_parallel': 2,
        'dry_run': True,
        'openpi_bridge.enabled': True,
        'openpi_bridge.port': 8123,
        'engine.device': 'cuda:0',
    }
    assert plan.node_env == {'CUDA_VISIBLE_DEVICES': '2'}
    (worker,) = plan.workers
    assert worker.cmd[0] == WORKER_EXECUTABLE
    assert worker.cmd[1:] == [
        '--checkpoint',
        '/data/DreamZero-DROID',
        '--device',
        'cuda:0',
        '--dtype',
        'bfloat16',
    ]
    assert worker.env == {
        'RANK': '1',
        'WORLD_SIZE': '2',
        'MASTER_ADDR': '127.0.0.1',
        'MASTER_PORT': '29512',
        'CUDA_VISIBLE_DEVICES': '3',
    }


def test_empty_arguments_keep_the_config_values():
    plan = plan_launch(read_params_file(CONFIG / 'cpu_small.yaml'))
    assert plan.node_parameters == {'use_sim_time': False}
    assert plan.workers == [] and plan.node_env == {}


def test_config_cfg_parallel_without_gpus_runs_workers_on_the_config_device():
    config = {**read_params_file(CONFIG / 'cpu_small.yaml'), 'engine.cfg_parallel': 2}
    plan = plan_launch(config, checkpoint='/ckpt')
    assert plan.workers[0].cmd[4] == 'cpu' and 'CUDA_VISIBLE_DEVICES' not in plan.workers[0].env


@pytest.mark.parametrize(
    ('kwargs', 'message'),
    [
        (dict(gpus='0', cfg_parallel='2', checkpoint='/c'), 'needs 2 GPUs'),
        (dict(cfg_parallel='2'), 'needs a checkpoint'),
        (dict(cfg_parallel='0'), r'engine.cfg_parallel: 0 is outside the range \[1, 2\]'),
        (dict(dry_run='maybe'), 'expected true or false'),
        (dict(gpus='0,x'), 'GPU indices'),
    ],
)
def test_bad_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plan_launch(read_params_file(CONFIG / 'cpu_small.yaml'), **kwargs)


def test_remote_backend_cannot_be_cfg_parallel():
    config = {'engine.backend': 'remote'}
    with pytest.raises(ValueError, match='backend local'):
        plan_launch(config, cfg_parallel='2', checkpoint='/c')


def test_parse_gpus():
    assert parse_gpus(' 0, 1 ,') == ['0', '1'] and parse_gpus('') == []


def test_cuda_ranks_without_gpus_get_one_gpu_each():
    plan = plan_launch(read_params_file(CONFIG / 'droid.yaml'), checkpoint='/c')
    assert plan.node_env == {'CUDA_VISIBLE_DEVICES': '0'}
    assert plan.workers[0].env['CUDA_VISIBLE_DEVICES'] == '1'
