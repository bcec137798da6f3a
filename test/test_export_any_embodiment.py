# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A robot other than DROID: the columns follow its embodiment file and its action groups.

YAM (two 6-joint arms and two grippers, three cameras) at test image sizes, its joints mapped by
the shipped groups (``-p action_groups:=yam``): ``observation.state`` and ``action`` hold its
state and action keys in its order, ``modality.json`` is written as upstream's
``convert_lerobot_to_gear.py`` writes it, and every action key is relative, as
``yam_relative.yaml`` trains it.
"""

import json

from embodiment_support import shipped_embodiment
from export_support import episode_frame, key_values, read_meta, upstream_relative_stats
import numpy as np
from replay_support import START, arm_speed_limits, random_robot_bag
import yaml

from dreamzero_ros.export.cli import main

ARMS = [f'{side}_joint{i}' for side in ('left', 'right') for i in range(1, 7)]
GRIPPERS = ['left_gripper', 'right_gripper']


def _positions(t: float) -> np.ndarray:
    return np.array([0.1 * np.sin(t + j) for j in range(12)] + [0.2 + 0.1 * t, 0.7 - 0.1 * t])


def _bag(path, cameras):
    topics = {key: f'/cameras/{key.replace("-", "_")}' for key in cameras}
    bag = random_robot_bag(
        path,
        topics,
        [*ARMS, *GRIPPERS],
        _positions,
        frames=(45, 30.0, (24, 64)),
        joint_states=(150, 100.0),
    )
    return bag, topics


def test_a_bimanual_robot_exports_its_own_keys(tmp_path):
    embodiment = shipped_embodiment('yam', camera_size=(24, 64))
    file = tmp_path / 'yam_small.yaml'
    file.write_text(yaml.safe_dump(embodiment.to_mapping(with_statistics=False)))
    bag, topics = _bag(tmp_path / 'bag', embodiment.camera_keys)
    parameters = {
        'action_groups': 'yam',
        'camera_keys': list(topics),
        'camera_topics': list(topics.values()),
        'camera_rates_hz': [30.0],
        'safety.joint_lower': [-3.0] * 12 + [0.0] * 2,
        'safety.joint_upper': [3.0] * 12 + [1.0] * 2,
        'safety.max_step_delta': [0.2] * 14,
        **arm_speed_limits(12, max_acceleration=10.0, max_jerk=5000.0),
    }
    options = [
        x for name, value in parameters.items() for x in ('-p', f'{name}={json.dumps(value)}')
    ]
    out = tmp_path / 'ds'
    argv = [str(bag), '-o', str(out), '--embodiment', str(file), '--task', 'fold the towel']
    assert main([*argv, *options, '--no-progress', '--min-frames', '5']) == 0
    meta = read_meta(out)
    assert meta['info']['fps'] == 30 and meta['info']['robot_type'] == 'yam'
    assert list(meta['modality']['state']) == [key.key for key in embodiment.state]
    assert meta['modality']['state']['right_joint_pos'] == {
        'original_key': 'observation.state',
        'start': 7,
        'end': 13,
        'rotation_type': None,
        'absolute': True,
        'dtype': 'float64',
        'range': None,
    }
    assert meta['modality']['annotation'] == {'task': {'original_key': 'annotation.task'}}
    frame = episode_frame(out, meta, 0)
    assert [meta['tasks'][i] for i in frame['annotation.task']] == ['fold the towel'] * len(frame)
    start = meta['episodes'][0]['recording']['start_s'] - START
    times = start + np.arange(len(frame) + 1) / 30
    # the latest joint state at or before each frame (100 Hz, so within 10 ms)
    joints = np.array([_positions(np.floor(t * 100 + 1e-6) / 100) for t in times])
    np.testing.assert_allclose(key_values(frame, meta, 'state', 'left_joint_pos'), joints[:-1, :6])
    np.testing.assert_allclose(
        key_values(frame, meta, 'state', 'right_gripper_pos')[:, 0], joints[:-1, 13]
    )
    np.testing.assert_allclose(
        key_values(frame, meta, 'action', 'right_joint_pos'), joints[1:, 6:12]
    )
    np.testing.assert_allclose(
        key_values(frame, meta, 'action', 'left_gripper_pos')[:, 0], joints[1:, 12]
    )
    relative = json.loads((out / 'meta/relative_stats_dreamzero.json').read_text())
    assert list(relative) == [key.key for key in embodiment.action]
    expected = upstream_relative_stats(out, meta, 'left_joint_pos', 24)
    np.testing.assert_allclose(relative['left_joint_pos']['q99'], expected['q99'], atol=1e-15)
    videos = sorted(p.parent.name for p in out.rglob('*.mp4'))
    assert videos == sorted(f'observation.images.{key}' for key in embodiment.camera_keys)
