# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Unit tests of what the launch file starts: the node, its overrides and its GPUs."""

from pathlib import Path

import pytest

from dreamzero_ros.core.launch_plan import parse_gpus, plan_launch
from dreamzero_ros.core.node_config import read_params_file

CONFIG = Path(__file__).resolve().parents[1] / 'config'


def test_droid_on_two_gpus_gives_the_node_one_and_its_worker_the_other():
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
        'engine.worker_gpus': '3',
    }
    assert plan.node_env == {'CUDA_VISIBLE_DEVICES': '2'}


def test_empty_arguments_keep_the_config_values():
    plan = plan_launch(read_params_file(CONFIG / 'cpu_small.yaml'))
    assert plan.node_parameters == {'use_sim_time': False} and plan.node_env == {}


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


def test_bad_config_values_stop_the_launch():
    config = {**read_params_file(CONFIG / 'cpu_small.yaml'), 'max_age': 'soon'}
    with pytest.raises(ValueError, match="max_age: expected a double, got 'soon'"):
        plan_launch(config)
