# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Replay of a bimanual and a mobile robot's bags: every action group scored on its own motion."""

import json

from embodiment_support import shipped_embodiment, write_shipped_checkpoint
import numpy as np
import pytest
from replay_support import arm_speed_limits, random_robot_bag, replay_arguments

from dreamzero_ros.core.robot.action_groups import load_groups
from dreamzero_ros.engine.embodiment import EMBODIMENTS_DIR
from dreamzero_ros.replay.cli import replay_main


def _joints(tag):
    """joint_states names of the arm columns, then the grippers, of the shipped groups."""
    specs = load_groups(tag, EMBODIMENTS_DIR)
    arm = [j for s in specs if s.output == 'joint_trajectory' for j in s.joints]
    return arm, [s.gripper_joint for s in specs if s.output == 'gripper']


def _bag(path, tag):
    """4 s of the embodiment's cameras (24x64, 15 Hz) and its joints (50 Hz, one topic)."""
    embodiment = shipped_embodiment(tag)
    arm, grippers = _joints(tag)
    cameras = {key: f'/cameras/{key.replace("-", "_")}' for key in embodiment.camera_keys}
    return random_robot_bag(
        path,
        cameras,
        [*arm, *grippers],
        lambda t: [0.1 * np.sin(t + j) for j in range(len(arm))] + [0.5] * len(grippers),
        seed=1,
    )


@pytest.mark.parametrize(('tag', 'velocities'), [('yam', 0), ('agibot', 2)])
def test_replay_scores_every_group_of_a_bimanual_robot(tmp_path, capsys, tag, velocities):
    embodiment = shipped_embodiment(tag)
    arm, grippers = _joints(tag)
    checkpoint = write_shipped_checkpoint(tmp_path / 'checkpoint', tag)
    bag = _bag(tmp_path / 'bag', tag)
    width = len(arm) + len(grippers) + velocities
    parameters = {
        'action_groups': tag,
        'camera_keys': list(embodiment.camera_keys),
        'camera_topics': [f'/cameras/{k.replace("-", "_")}' for k in embodiment.camera_keys],
        'image_height': 0,
        'image_width': 0,
        'safety.joint_lower': [-3.0] * len(arm) + [0.0] * len(grippers) + [-0.2] * velocities,
        'safety.joint_upper': [3.0] * len(arm) + [1.0] * len(grippers) + [0.2] * velocities,
        'safety.max_step_delta': [0.2] * width,
        **arm_speed_limits(len(arm), max_acceleration=10.0, max_jerk=5000.0),
        'max_age': 1.0,
    }
    out = tmp_path / 'out'
    arguments = replay_arguments(bag, checkpoint, out, parameters)
    assert replay_main(arguments) == 0, capsys.readouterr().err
    metrics = json.loads((out / 'metrics.json').read_text())
    assert metrics['chunks'] == 2
    groups = metrics['groups']
    specs = load_groups(tag, EMBODIMENTS_DIR)
    assert list(groups) == [s.name for s in specs]
    for spec in specs:
        score = groups[spec.name]
        if spec.output == 'twist':  # no recorded base velocity in the bag: nothing to score
            assert score['joints'] == [f'base/{axis}' for axis in spec.axes]
            assert score['mae'] is None
            continue
        assert score['joints'] == list(spec.state_names)
        assert score['mae'] is not None and score['hold_baseline_mae'] is not None
    # the grippers' recorded 0.5 (range 0..1) is what the hold baseline predicts exactly
    gripper_groups = [s.name for s in specs if s.output == 'gripper']
    assert all(groups[name]['hold_baseline_mae'] == pytest.approx(0.0) for name in gripper_groups)
    assert len(metrics['errors']['joint_names']) == width
