# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Replay of a bag recorded on a robot other than DROID: shapes from the loaded policy."""

import json

from embodiment_support import UR_TEMPLATE, write_ur_checkpoint
import numpy as np
import pytest

from dreamzero_ros.core.messages import to_ns
from dreamzero_ros.replay.bag_io import BagWriter
from dreamzero_ros.replay.cli import replay_main
from dreamzero_ros.replay.topics import IMAGE_TYPE, JOINT_STATE_TYPE
from dreamzero_ros.replay.typestore import BAG_MESSAGES

ARM = [f'ur_joint{i}' for i in range(1, 7)]
GRIPPER = 'robotiq_finger'
TOPICS = {'front': '/front_camera/image_raw', 'wrist': '/wrist_camera/image_raw'}


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    return write_ur_checkpoint(tmp_path_factory.mktemp('ur'))


@pytest.fixture(scope='module')
def bag(tmp_path_factory):
    """4 s of two 48x128 cameras at 15 Hz and 7 joint positions at 50 Hz."""
    path = tmp_path_factory.mktemp('bags') / 'ur_bag'
    rng = np.random.default_rng(0)
    start = 1_700_000_000.0
    with BagWriter(path) as writer:
        for topic in TOPICS.values():
            writer.add_topic(topic, IMAGE_TYPE)
        writer.add_topic('/joint_states', JOINT_STATE_TYPE)
        records = []
        for index in range(60):
            stamp = to_ns(start + index / 15)
            for camera, topic in TOPICS.items():
                frame = rng.integers(0, 255, (48, 128, 3), dtype=np.uint8)
                records.append((stamp, topic, BAG_MESSAGES.image(stamp, frame, camera)))
        for index in range(200):
            t = index / 50
            stamp = to_ns(start + t)
            positions = np.array([0.1 * np.sin(t + j) for j in range(6)] + [0.04])
            records.append(
                (
                    stamp,
                    '/joint_states',
                    BAG_MESSAGES.joint_state(stamp, [*ARM, GRIPPER], positions),
                )
            )
        for stamp, topic, message in sorted(records, key=lambda record: record[0]):
            writer.write(topic, stamp, message)
    return path


def _arguments(bag, checkpoint, out, arm=ARM):
    parameters = {
        'camera_keys': list(TOPICS),
        'camera_topics': list(TOPICS.values()),
        'arm_joint_names': arm,
        'gripper_joint_name': GRIPPER,
        'safety.joint_lower': [-6.0] * len(arm) + [0.0],
        'safety.joint_upper': [6.0] * len(arm) + [1.0],
        'safety.max_step_delta': [0.2] * len(arm) + [1.0],
        'safety.max_velocity': [3.0] * len(arm),
        'safety.stop_deceleration': [10.0] * len(arm),
        'safety.max_acceleration': [1000.0] * len(arm),
        'safety.max_jerk': [1.0e6] * len(arm),
        'max_age': 1.0,
    }
    overrides = [f'{name}={json.dumps(value)}' for name, value in parameters.items()]
    return [
        str(bag), '--checkpoint', str(checkpoint), '--device', 'cpu', '--dtype', 'float32',
        '--prompt-template', UR_TEMPLATE, '--max-chunks', '2', '--out', str(out),
        '--no-progress', *(item for o in overrides for item in ('--param', o)),
    ]  # fmt: skip


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
