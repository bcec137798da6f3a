# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Unit tests of what the launch file starts: the node, its overrides and its GPUs."""

from pathlib import Path

import pytest

from dreamzero_ros.core.config.launch_plan import (
    parse_gpus,
    plan_launch,
    sim_arm_parameters,
    simulator_parameters,
)
from dreamzero_ros.core.config.node_config import read_params_file

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


def test_tensor_parallel_on_two_gpus_and_the_checkpoint_arguments():
    plan = plan_launch(
        read_params_file(CONFIG / 'droid.yaml'),
        checkpoint='/data/ur5-lora',
        base_checkpoint='/data/DreamZero-DROID',
        encoder_dir='/data/wan21',
        embodiment_tag='ur5',
        embodiment_file='/data/ur5.yaml',
        prompt_template='A UR5 arm. {instruction}',
        gpus='1,0',
        cfg_parallel='1',
        tensor_parallel='2',
    )
    assert plan.node_parameters == {
        'use_sim_time': False,
        'engine.checkpoint': '/data/ur5-lora',
        'engine.base_checkpoint': '/data/DreamZero-DROID',
        'engine.encoder_dir': '/data/wan21',
        'engine.embodiment_tag': 'ur5',
        'engine.embodiment_file': '/data/ur5.yaml',
        'engine.prompt_template': 'A UR5 arm. {instruction}',
        'engine.cfg_parallel': 1,
        'engine.tensor_parallel': 2,
        'engine.device': 'cuda:0',
        'engine.worker_gpus': '0',
    }
    assert plan.node_env == {'CUDA_VISIBLE_DEVICES': '1'}
    four = plan_launch({}, checkpoint='/c', gpus='0,1,2,3', cfg_parallel='2', tensor_parallel='2')
    assert four.node_parameters['engine.worker_gpus'] == '1,2,3'


def test_empty_arguments_keep_the_config_values():
    plan = plan_launch(read_params_file(CONFIG / 'cpu_small.yaml'))
    assert plan.node_parameters == {'use_sim_time': False} and plan.node_env == {}


@pytest.mark.parametrize(
    ('kwargs', 'message'),
    [
        (dict(gpus='0', cfg_parallel='2', checkpoint='/c'), 'need 2 GPUs, one each'),
        (
            dict(gpus='0,1,2', cfg_parallel='2', tensor_parallel='2', checkpoint='/c'),
            r'cfg_parallel 2 x tensor_parallel 2 = 4 ranks need 4 GPUs, one each; got gpus:=0,1,2',
        ),
        (dict(cfg_parallel='2'), 'need a checkpoint'),
        (dict(tensor_parallel='2'), 'tensor_parallel 2 = 2 ranks need a checkpoint'),
        (dict(cfg_parallel='0'), r'engine.cfg_parallel: 0 is outside the range \[1, 2\]'),
        (dict(tensor_parallel='16'), r'engine.tensor_parallel: 16 is outside the range \[1, 8\]'),
        (dict(tensor_parallel='two'), "tensor_parallel must be an integer, got 'two'"),
        (dict(dry_run='maybe'), 'expected true or false'),
        (dict(gpus='0,x'), 'GPU indices'),
    ],
)
def test_bad_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plan_launch(read_params_file(CONFIG / 'cpu_small.yaml'), **kwargs)


@pytest.mark.parametrize('parallel', [dict(cfg_parallel='2'), dict(tensor_parallel='2')])
def test_remote_backend_cannot_be_parallel(parallel):
    config = {'engine.backend': 'remote'}
    with pytest.raises(ValueError, match='backend local'):
        plan_launch(config, checkpoint='/c', **parallel)


def test_parse_gpus():
    assert parse_gpus(' 0, 1 ,') == ['0', '1'] and parse_gpus('') == []


def test_bad_config_values_stop_the_launch():
    config = {**read_params_file(CONFIG / 'cpu_small.yaml'), 'max_age': 'soon'}
    with pytest.raises(ValueError, match="max_age: expected a double, got 'soon'"):
        plan_launch(config)


def test_autostart_argument_sets_the_node_parameter():
    assert plan_launch({}, autostart='false').node_parameters['autostart'] is False
    assert plan_launch({}, autostart='true').node_parameters['autostart'] is True
    with pytest.raises(ValueError, match='expected true or false'):
        plan_launch({}, autostart='maybe')


@pytest.mark.parametrize('name', ['cpu_small.yaml', 'droid.yaml'])
def test_the_simulated_arm_is_made_to_match_the_config(name):
    config = read_params_file(CONFIG / name)
    arm = sim_arm_parameters(config)
    assert arm['joints'] == [f'panda_joint{i}' for i in range(1, 8)]
    assert arm['controller'] == 'joint_trajectory_controller'
    assert arm['joint_states_topic'] == 'joint_states'
    assert arm['gripper.joint'] == config['gripper_joint_name'] == 'panda_finger_joint1'
    assert arm['gripper.initial_position'] == 0.04  # the Franka hand starts open
    assert arm['gripper.interface'] == config['gripper.interface']
    assert arm['gripper.name'] == config['gripper.command_name']


def test_the_simulated_arm_needs_a_joint_trajectory_topic():
    with pytest.raises(ValueError, match='<controller>/joint_trajectory'):
        sim_arm_parameters({'trajectory_topic': 'arm/commands'})


def test_the_simulator_renders_each_camera_on_the_topic_the_node_reads():
    config = read_params_file(CONFIG / 'droid.yaml')
    config['camera_topics'] = ['cams/wrist', 'cams/left', 'cams/right']
    parameters = simulator_parameters(config)
    assert parameters['cameras.topics'] == ['cams/wrist', 'cams/left', 'cams/right']
    assert parameters['joints'] == sim_arm_parameters(config)['joints']
    # the scene's cameras are DROID's keys: a node that reads other keys has none of them
    config['camera_keys'] = ['front', 'left', 'right']
    with pytest.raises(ValueError, match='reads no camera wrist_image_left'):
        simulator_parameters(config)
