# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``dreamzero-preflight`` against a live system over DDS, and its checks one by one.

The live system: ``dreamzero-sim-arm`` (joint_states at 100 Hz, the trajectory topic subscribed,
the Panda URDF on ``robot_description``) and this harness publishing the three cameras at 15 Hz.
Preflight runs as its own process with ``config/cpu_small.yaml`` and a small random checkpoint.
"""

from importlib import resources
import subprocess
import sys

from closed_loop import ClosedLoop
from node_support import CONFIG, REPO, ros_env
import numpy as np
import pytest

from dreamzero_ros.core.motion.envelope import Envelope, EnvelopeConfig
from dreamzero_ros.core.processes import preflight

URDF = (resources.files('dreamzero_ros') / 'descriptions' / 'panda.urdf').read_text()
ARM = [f'panda_joint{i}' for i in range(1, 8)]
READY = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])


def test_topic_rate_verdicts():
    assert preflight.topic_rate('cam', list(np.arange(0, 3, 1 / 15)), 15.0, 3.0, 1).ok
    slow = preflight.topic_rate('cam', list(np.arange(0, 3, 1 / 5)), 15.0, 3.0, 1)
    assert (
        not slow.ok and '5.0 Hz, expected 15 Hz' in slow.line() and '-> publish cam' in slow.line()
    )
    unpublished = preflight.topic_rate('cam', [], 15.0, 3.0, publishers=0)
    assert unpublished.line() == (
        '[FAIL] rate cam: no message in 3 s, no publisher -> start the publisher of cam, or remap '
        'the node parameter naming it'
    )
    silent = preflight.topic_rate('cam', [], 15.0, 3.0, publishers=2)
    assert silent.line() == (
        '[FAIL] rate cam: no message in 3 s from 2 publisher(s) -> check that they publish '
        '(ros2 topic hz cam)'
    )


def test_description_verdicts():
    assert preflight.description_joints(ARM, ARM).ok
    missing = preflight.description_joints(ARM, ARM[:6])
    assert not missing.ok and "lacks ['panda_joint7']" in missing.detail


def test_pose_envelope_and_graph_verdicts():
    envelope = Envelope.from_description(URDF, ARM, EnvelopeConfig(table_height=0.0))
    inside = preflight.pose_in_envelope(envelope, READY)
    assert inside.ok and 'closest:' in inside.detail
    high_table = Envelope.from_description(URDF, ARM, EnvelopeConfig(table_height=0.6))
    below = preflight.pose_in_envelope(high_table, READY)
    assert not below.ok and 'beyond table z +0.600' in below.detail
    assert not preflight.device_memory(30 * 2**30, 20 * 2**30, 'cuda:0', 'dit 28.0').ok
    assert preflight.device_memory(10 * 2**30, 20 * 2**30, 'cuda:0', 'dit 8.0').ok
    assert preflight.exit_code([inside, below]) == 1 and preflight.exit_code([inside]) == 0


def _preflight(*params: str, duration: float = 3.0) -> subprocess.CompletedProcess:
    args = [sys.executable, '-m', 'dreamzero_ros.ros.preflight', '--params-file']
    args += [str(CONFIG / 'cpu_small.yaml'), '--duration', str(duration)]
    for item in params:
        args += ['-p', item]
    return subprocess.run(
        args, cwd=REPO, env=ros_env(), capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope='module')
def live_system(tmp_path_factory):
    from dreamzero_ros.droid_clips import demo_clips
    from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint

    folder = tmp_path_factory.mktemp('preflight')
    checkpoint = write_random_checkpoint(folder / 'tiny', preset='tiny')
    with ClosedLoop(folder, 'preflight_harness') as loop:
        loop.start_sim()  # the robot of config/cpu_small.yaml
        loop.stream_cameras(demo_clips(30)[0])
        yield checkpoint


# 2 Hz expected: the harness's 15 Hz stream drops to ~4-7 Hz on 2 heavily loaded cores
SYSTEM = (
    'gripper_joint_name:=panda_finger_joint1',
    'envelope.enabled:=true',
    'robot_description.source:=topic',
    'control_rate_hz:=2.0',
    'camera_qos.depth:=9',  # the frames a 15 Hz camera sends between two 2 Hz reads, plus one
)


@pytest.mark.slow  # a live system over DDS: see pytest.ini
def test_preflight_passes_on_a_healthy_system(live_system):
    result = _preflight(*SYSTEM, f'engine.checkpoint:={live_system}')
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stdout + result.stderr
    for expected in (
        '[ OK ] rate wrist_image_left:',
        '[ OK ] encoding exterior_image_2_left: rgb8',
        '[ OK ] rate joint_states:',
        '[ OK ] robot description: ',
        '[ OK ] joints of arm: all 7 in joint_states',
        '[ OK ] joints of gripper: all 1 in joint_states',
        '[ OK ] description joints: all 7 arm joints described',
        '[ OK ] pose in envelope: closest:',
        '[ OK ] controller arm: /joint_trajectory_controller (node name) on '
        'joint_trajectory_controller/joint_trajectory',
        "[ OK ] controller joints arm: /joint_trajectory_controller joints = the group's 7 joints",
        '[ OK ] controller gripper: /gripper_controller (node name) on '
        'gripper_controller/joint_trajectory',
        '[ OK ] GPU memory: cpu: not a CUDA device',
    ):
        assert any(line.startswith(expected) for line in lines), (expected, result.stdout)


@pytest.mark.slow  # a live system over DDS: see pytest.ini
def test_preflight_names_what_to_fix(live_system):
    result = _preflight(
        *SYSTEM,
        f'engine.checkpoint:={live_system}',
        'envelope.table_height:=0.6',
        'camera_topics:=[wrist_image_left, exterior_image_1_left, no_such_camera]',
        'trajectory_topic:=arm_controller/joint_trajectory',
        'gripper.interface:=action',
        'gripper.command_name:=gripper_action',
    )
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert '[FAIL] rate no_such_camera: no message in 3 s, no publisher -> start the' in out
    assert '[FAIL] pose in envelope: ' in out and 'beyond table z +0.600' in out
    assert '[FAIL] controller arm: arm_controller/joint_trajectory: nobody subscribes' in out
    assert '[FAIL] controller gripper: gripper_action: no action server' in out


def test_invalid_parameters_exit_2():
    result = _preflight('envelope.keep_out:=[0.0, 1.0]', duration=0.1)
    assert result.returncode == 2 and '6 values per box' in result.stdout
