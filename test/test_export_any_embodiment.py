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
import yaml

from dreamzero_ros.core.messages import to_ns
from dreamzero_ros.export.cli import main
from dreamzero_ros.replay.bag_io import BagWriter
from dreamzero_ros.replay.typestore import BAG_MESSAGES

ARMS = [f'{side}_joint{i}' for side in ('left', 'right') for i in range(1, 7)]
GRIPPERS = ['left_gripper', 'right_gripper']
START = 1_700_000_000.0


def _positions(t: float) -> np.ndarray:
    return np.array([0.1 * np.sin(t + j) for j in range(12)] + [0.2 + 0.1 * t, 0.7 - 0.1 * t])


def _bag(path, cameras):
    topics = {key: f'/cameras/{key.replace("-", "_")}' for key in cameras}
    rng = np.random.default_rng(0)
    records = []
    for index in range(45):
        stamp = to_ns(START + index / 30)
        for key, topic in topics.items():
            frame = rng.integers(0, 255, (24, 64, 3), dtype=np.uint8)
            records.append((stamp, topic, BAG_MESSAGES.image(stamp, frame, key)))
    for index in range(150):
        stamp = to_ns(START + index / 100)
        message = BAG_MESSAGES.joint_state(stamp, [*ARMS, *GRIPPERS], _positions(index / 100))
        records.append((stamp, '/joint_states', message))
    with BagWriter(path) as writer:
        for topic in topics.values():
            writer.add_topic(topic, 'sensor_msgs/msg/Image')
        writer.add_topic('/joint_states', 'sensor_msgs/msg/JointState')
        for stamp, topic, message in sorted(records, key=lambda record: record[0]):
            writer.write(topic, stamp, message)
    return path, topics


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
        'safety.max_velocity': [3.0] * 12,
        'safety.stop_deceleration': [10.0] * 12,
        'safety.max_acceleration': [10.0] * 12,
        'safety.max_jerk': [5000.0] * 12,
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
