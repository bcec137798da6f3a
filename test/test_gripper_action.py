# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The node's GripperCommand goals reach a gripper action server with DROID's sign, over DDS.

control_msgs has no wheel: the test builds control_msgs/action/GripperCommand (the upstream
definition) with rosidl first. Four processes: a scripted OpenPI policy (gripper 1.0 = closed for
the first chunks, then 0.0 = open), the policy node on it (``engine.backend: remote``,
``gripper.interface: action``), ``dreamzero-sim-arm`` serving ``gripper_action`` on a Franka
hand range (0.04 m open, 0.0 closed), and this harness publishing the cameras.
"""

import socket
import subprocess
import sys

from interface_support import control_msgs_env
from node_support import CONFIG, REPO, Harness, NodeProcess, RobotStream, ros_env
import pytest

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 120.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def test_gripper_goals_close_when_the_policy_says_one(tmp_path, monkeypatch):
    from sensor_msgs.msg import JointState

    from dreamzero_ros.droid_clips import demo_clips

    for name, value in control_msgs_env().items():
        monkeypatch.setenv(name, value)
    env = {**ros_env(), 'PYTHONUNBUFFERED': '1'}
    port = _free_port()
    logs = {name: open(tmp_path / f'{name}.log', 'w') for name in ('policy', 'arm')}  # noqa: SIM115
    policy = subprocess.Popen(
        [sys.executable, str(REPO / 'test' / 'gripper_policy_peer.py'), str(port), '6'],
        cwd=REPO, env=env, stdout=logs['policy'], stderr=subprocess.STDOUT,
    )  # fmt: skip
    arm = subprocess.Popen(
        [sys.executable, '-m', 'dreamzero_ros.ros.sim_arm', '--ros-args',
         '-p', 'gripper.interface:=action', '-p', 'gripper.name:=gripper_action',
         '-p', 'gripper.speed:=0.2'],
        env=env, stdout=logs['arm'], stderr=subprocess.STDOUT,
    )  # fmt: skip
    harness = Harness('gripper_action_harness')
    harness.record('states', JointState, 'joint_states')
    stream = RobotStream(harness, demo_clips(30)[0])
    stream.joints_on = False

    node = None

    def log() -> str:
        node_log = node.log() if node is not None else '(node not started)'
        return node_log + '\n--- sim arm:\n' + (tmp_path / 'arm.log').read_text()

    def gripper() -> float | None:
        states = harness.messages('states')
        return states[-1].position[7] if states else None

    try:
        # the arm is seen before the node starts, so nothing can have moved the gripper yet
        assert harness.wait_for(lambda: gripper() is not None, 30, 'joint states', log)
        assert abs(gripper() - 0.04) < 1e-6  # starts open
        node = NodeProcess(
            tmp_path / 'node.log',
            'engine.backend:=remote',
            f'engine.remote_uri:=ws://127.0.0.1:{port}',
            'engine.warmup:=false',
            'scheduler.step_duration:=0.0',
            'scheduler.min_replan_period:=0.5',  # 6 closed chunks: 3 s closed
            'gripper_joint_name:=panda_finger_joint1',
            'gripper_range:=[0.04, 0.0]',
            'gripper.interface:=action',
            'gripper.command_name:=gripper_action',
            params_file=CONFIG / 'cpu_small.yaml',
        )
        harness.wait_for(lambda: abs(gripper()) < 1e-4, TIMEOUT, 'the gripper to close', log)
        harness.wait_for(
            lambda: abs(gripper() - 0.04) < 1e-4, TIMEOUT, 'the gripper to open again', log
        )
        goals = [line[-6:] for line in log().splitlines() if 'gripper goal: position' in line]
        # (the first plan starts on the measured, open gripper: an open goal may come first)
        assert '0.0000' in goals and goals[-1] == '0.0400', goals
        assert goals.index('0.0000') < len(goals) - 1
    finally:
        stream.close()
        if node is not None:
            node.stop()
        for process in (arm, policy):
            process.terminate()
            process.wait(10)
        for handle in logs.values():
            handle.close()
        harness.close()
