# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The policy node driving a robot other than DROID over DDS: its shapes come from the policy.

A 6-joint arm with a gripper and two cameras (front, wrist) on topics of their own, from a tiny
checkpoint trained (randomly) for it; and the same checkpoint refused when the parameters
describe DROID instead.
"""

from closed_loop import params_file
from embodiment_support import UR_TEMPLATE, write_ur_checkpoint
from node_support import NODE, NodeProcess
import numpy as np
import pytest

from dreamzero_ros.core.config.node_config import defaults

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 90.0  # the CPU is shared with other test processes
UR_ARM = [
    'shoulder_pan_joint',
    'shoulder_lift_joint',
    'elbow_joint',
    'wrist_1_joint',
    'wrist_2_joint',
    'wrist_3_joint',
]
GRIPPER = 'robotiq_finger_joint'
TOPICS = {'front': 'front_camera/image_raw', 'wrist': 'wrist_camera/image_raw'}


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    return write_ur_checkpoint(tmp_path_factory.mktemp('ur'))


def _ur_parameters(checkpoint) -> dict:
    return {
        'engine.checkpoint': str(checkpoint),
        'engine.prompt_template': UR_TEMPLATE,
        'engine.warmup': True,
        'camera_keys': list(TOPICS),
        'camera_topics': list(TOPICS.values()),
        'arm_joint_names': UR_ARM,
        'gripper_joint_name': GRIPPER,
        'image_height': 0,
        'image_width': 0,
        'safety.joint_lower': [-6.0] * 6 + [0.0],
        'safety.joint_upper': [6.0] * 6 + [1.0],
        'safety.max_step_delta': [0.2] * 6 + [1.0],
        'safety.max_velocity': [3.0] * 6,
        'safety.stop_deceleration': [10.0] * 6,
        'safety.max_acceleration': [1000.0] * 6,
        'safety.max_jerk': [1.0e6] * 6,
        'dry_run': True,
    }


def test_a_six_joint_two_camera_robot_gets_its_trajectories(tmp_path, checkpoint, closed_loop):
    from trajectory_msgs.msg import JointTrajectory

    loop = closed_loop('ur_harness')
    harness = loop.harness
    harness.record('preview', JointTrajectory, f'{NODE}/preview_trajectory')
    node = loop.start_node(params_file=params_file(tmp_path, **_ur_parameters(checkpoint)))
    rng = np.random.default_rng(0)
    clips = {topic: rng.integers(0, 255, (30, 48, 128, 3), np.uint8) for topic in TOPICS.values()}
    stream = loop.stream_cameras(clips, joint_states=True, joint_names=[*UR_ARM, GRIPPER])
    stream.joint_positions = lambda now: [0.1, -0.5, 0.8, -1.0, 0.3, 0.2, 0.04]
    plans = harness.wait_for(
        lambda: harness.motions('preview'), TIMEOUT, 'a trajectory for the UR arm', node.log
    )
    trajectory = plans[0]
    assert list(trajectory.joint_names) == UR_ARM
    assert all(len(point.positions) == 6 for point in trajectory.points)
    positions = np.array([point.positions for point in trajectory.points])
    assert np.all(np.abs(positions) <= 6.0 + 1e-9)
    assert 'policy warmed up' in node.log()
    assert loop.close() == 0, node.log()[-3000:]


def test_droid_parameters_on_another_robots_checkpoint_fail_configure(tmp_path, checkpoint):
    parameters = {
        'engine.checkpoint': str(checkpoint),
        'engine.prompt_template': UR_TEMPLATE,
        'engine.warmup': False,
    }
    assert defaults()['camera_keys'] != tuple(TOPICS)
    node = NodeProcess(tmp_path / 'node.log', params_file=params_file(tmp_path, **parameters))
    assert node.wait_exit(TIMEOUT) == 1
    log = node.log()
    assert "the policy reads cameras ['front', 'wrist'], camera_keys names" in log
    assert 'the policy reads 6 arm joints, arm_joint_names names 7' in log
    assert 'autostart: configure failed' in log
