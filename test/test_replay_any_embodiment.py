# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Replay of a bag recorded on a robot other than DROID: shapes from the loaded policy."""

import json

from embodiment_support import UR_TEMPLATE, write_ur_checkpoint
import numpy as np
import pytest
from replay_support import arm_speed_limits, random_robot_bag, replay_arguments

from dreamzero_ros.replay.cli import replay_main

ARM = [f'ur_joint{i}' for i in range(1, 7)]
GRIPPER = 'robotiq_finger'
TOPICS = {'front': '/front_camera/image_raw', 'wrist': '/wrist_camera/image_raw'}


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    return write_ur_checkpoint(tmp_path_factory.mktemp('ur'))


@pytest.fixture(scope='module')
def bag(tmp_path_factory):
    """4 s of two 48x128 cameras at 15 Hz and 7 joint positions at 50 Hz."""
    return random_robot_bag(
        tmp_path_factory.mktemp('bags') / 'ur_bag',
        TOPICS,
        [*ARM, GRIPPER],
        lambda t: [0.1 * np.sin(t + j) for j in range(6)] + [0.04],
        frames=(60, 15.0, (48, 128)),
    )


def _arguments(bag, checkpoint, out, arm=ARM):
    parameters = {
        'camera_keys': list(TOPICS),
        'camera_topics': list(TOPICS.values()),
        'arm_joint_names': arm,
        'gripper_joint_name': GRIPPER,
        'safety.joint_lower': [-6.0] * len(arm) + [0.0],
        'safety.joint_upper': [6.0] * len(arm) + [1.0],
        'safety.max_step_delta': [0.2] * len(arm) + [1.0],
        **arm_speed_limits(len(arm), max_acceleration=1000.0, max_jerk=1.0e6),
        'max_age': 1.0,
    }
    return replay_arguments(bag, checkpoint, out, parameters, '--prompt-template', UR_TEMPLATE)


def test_replay_scores_a_six_joint_robot(tmp_path, checkpoint, bag, capsys):
    out = tmp_path / 'out'
    assert replay_main(_arguments(bag, checkpoint, out)) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary['chunks'] == 2
    metrics = json.loads((out / 'metrics.json').read_text())
    errors = metrics['errors']
    assert errors['joint_names'] == [*ARM, GRIPPER]
    assert len(errors['by_step_joint']['mae']) == 24
    assert all(len(row) == 7 for row in errors['by_step_joint']['mae'])
    assert errors['arm']['mae'] is not None and errors['gripper']['mae'] is not None
    # each action group scored against its own recorded motion
    groups = metrics['groups']
    assert list(groups) == ['arm', 'gripper']
    assert groups['arm']['joints'] == ARM and groups['gripper']['joints'] == [GRIPPER]
    assert groups['arm']['mae'] == pytest.approx(errors['arm']['mae'])
    assert groups['gripper']['mae'] == pytest.approx(errors['gripper']['mae'])
    hold = metrics['hold_baseline_errors']
    assert groups['arm']['hold_baseline_mae'] == pytest.approx(hold['arm']['mae'])


def test_replay_refuses_parameters_that_do_not_fit_the_policy(tmp_path, checkpoint, bag, capsys):
    arguments = _arguments(bag, checkpoint, tmp_path / 'out', arm=ARM[:5])
    assert replay_main(arguments) == 2
    assert 'the policy reads 6 arm joints, arm_joint_names names 5' in capsys.readouterr().err
