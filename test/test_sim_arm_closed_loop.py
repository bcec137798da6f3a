# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The policy node drives the simulated arm over real DDS; the arm's joint states close the loop.

Three processes: the policy node (tiny engine, commands enabled), ``dreamzero-sim-arm`` with a
7-joint joint_trajectory_controller configuration, and this harness, which publishes the camera
streams only (the joint states come from the simulated arm) and records both sides.
"""

import subprocess
import sys

from node_support import ARM, CONFIG, Harness, NodeProcess, RobotStream, is_hold, ros_env
import numpy as np
import pytest

from dreamzero_ros.core.command_check import FRANKA_ERRORS

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 120.0


@pytest.fixture(scope='module')
def loop(tmp_path_factory):
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64, String
    from trajectory_msgs.msg import JointTrajectory

    from dreamzero_ros.droid_clips import demo_clips
    from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint

    folder = tmp_path_factory.mktemp('closed_loop')
    checkpoint = write_random_checkpoint(folder / 'tiny', preset='tiny')
    harness = Harness('closed_loop_harness')
    harness.record('trajectory', JointTrajectory, 'joint_trajectory_controller/joint_trajectory')
    harness.record('rejected', String, '/sim_arm/rejected')
    harness.record('states', JointState, 'joint_states')
    harness.record('gripper', Float64, 'gripper/command')
    harness.record('diagnostics', DiagnosticArray, '/diagnostics')
    arm_log = open(folder / 'sim_arm.log', 'w')  # noqa: SIM115 - closed below
    arm = subprocess.Popen(
        [
            sys.executable,
            '-m',
            'dreamzero_ros.ros.sim_arm',
            '--ros-args',
            '-p',
            'gripper.interface:=float64',
            '-p',
            'gripper.name:=gripper/command',
        ],
        stdout=arm_log,
        stderr=subprocess.STDOUT,
        env={**ros_env(), 'PYTHONUNBUFFERED': '1'},
    )
    node = NodeProcess(
        folder / 'node.log',
        f'engine.checkpoint:={checkpoint}',
        'engine.warmup:=false',
        'engine.num_threads:=1',
        'gripper_joint_name:=panda_finger_joint1',
        'gripper_range:=[0.04, 0.0]',
        'gripper.interface:=float64',
        'gripper.command_name:=gripper/command',
        # the tiny engine answers in ~0.1 s: space the chunks so that points are reached
        'scheduler.step_duration:=0.5',
        'scheduler.min_replan_period:=1.5',
        # on a loaded machine a trajectory may take longer than the default 50 ms to reach the
        # arm: the hand-over point lies further ahead (what a slow link would configure)
        'trajectory.handover_lead:=0.25',
        params_file=CONFIG / 'cpu_small.yaml',
    )
    stream = RobotStream(harness, demo_clips(30)[0])
    stream.joints_on = False
    yield harness, node, folder
    stream.close()
    node.stop()
    arm.terminate()
    arm.wait(10)
    arm_log.close()
    harness.close()


def _seconds(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def _accepted_by(harness):
    """Function: n -> when the harness saw the arm report its n-th accepted trajectory."""
    reports = [
        (arrived, int(value.value))
        for arrived, array in harness.received.get('diagnostics', [])
        for status in array.status
        if status.name.startswith('sim_arm')
        for value in status.values
        if value.key == 'trajectories_accepted'
    ]
    return lambda n: next((arrived for arrived, count in reports if count >= n), np.inf)


def test_the_simulated_arm_accepts_every_trajectory_and_follows_it(loop):
    harness, node, folder = loop

    def log():
        return node.log() + '\n--- sim arm:\n' + (folder / 'sim_arm.log').read_text()

    def motions():
        return [(t, m) for t, m in harness.received.get('trajectory', []) if m.header.stamp.sec]

    harness.wait_for(
        lambda: found if len(found := motions()) >= 4 else None, TIMEOUT, '4 trajectories', log
    )
    harness.wait_for(lambda: len(harness.messages('states')) > 50, 10, 'joint states', log)
    assert harness.messages('rejected') == [], log()
    # the arm's diagnostics are its own hardware, not the policy node's
    hardware = {
        status.name.split(':')[0]: status.hardware_id
        for array in harness.messages('diagnostics')
        for status in array.status
    }
    assert hardware['sim_arm'] == 'dreamzero_sim_arm', hardware
    assert hardware['dreamzero_policy'] == 'dreamzero', hardware
    assert 'ready: 7 joints on joint_trajectory_controller/joint_trajectory' in log()
    states = harness.messages('states')
    stamps = np.array([_seconds(s.header.stamp) for s in states])
    positions = np.array([s.position[:7] for s in states])
    assert list(states[-1].name[:7]) == ARM
    accepted = _accepted_by(harness)
    everything = list(harness.received['trajectory'])  # holds (stamp 0) replace a motion at once
    reached = 0
    for index, (_, msg) in enumerate(everything):
        if not msg.header.stamp.sec:
            continue
        start = _seconds(msg.header.stamp)
        # the arm's acceptance: points due before it are skipped, as JTC does with a late goal
        taken = accepted(index + 1)
        # the next trajectory may reach the arm before the harness, not before its own stamp
        replaced = np.inf
        if index + 1 < len(everything):
            arrived, following = everything[index + 1]
            replaced = min(arrived, _seconds(following.header.stamp) or np.inf)
        for point in msg.points:
            at = start + _seconds(point.time_from_start)
            if at >= min(replaced, stamps[-1]):
                break
            if at < taken:
                continue
            nearest = int(np.argmin(np.abs(stamps - at)))
            if abs(stamps[nearest] - at) < 0.02:
                np.testing.assert_allclose(positions[nearest], point.positions, atol=5e-3)
                reached += 1
    assert np.ptp(positions, axis=0).max() > 0.01, 'the arm never moved'
    assert reached >= 4, f'only {reached} trajectory points were reached before being replaced'
    # the loop is closed: the harness publishes no joint states, so every observation behind
    # these trajectories paired the cameras with the simulated arm's joint states
    assert 'bad_joints' not in node.log()


def test_the_arm_receives_nothing_a_franka_would_abort(loop):
    """The simulated arm checks its 1 kHz command as a Franka does (core/command_check.py)."""
    harness, node, folder = loop

    def log():
        return node.log() + '\n--- sim arm:\n' + (folder / 'sim_arm.log').read_text()

    def motions():
        found = [m for m in harness.messages('trajectory') if not is_hold(m)]
        return found if len(found) >= 4 else None

    harness.wait_for(motions, TIMEOUT, '4 trajectories', log)
    since = harness.now() + 1.5  # a report after the last of them was followed a while

    def report():
        for msg in reversed(harness.messages('diagnostics', since)):
            for status in msg.status:
                if status.name.startswith('sim_arm'):
                    return status, {kv.key: kv.value for kv in status.values}
        return None

    status, values = harness.wait_for(report, 10, 'a sim arm report', log)

    def joints(key):
        return np.array([float(v) for v in values[key].split()])

    for name in FRANKA_ERRORS.values():
        assert values[name] == '0', (name, values, log())
    assert status.level == b'\x00', status.message
    # continuous acceleration wherever a trajectory took over or a segment ended
    assert joints('acceleration_jump_max').max() < 1e-3, values
    assert np.all(joints('jerk_max') <= joints('jerk_limit')), values
    assert np.all(joints('acceleration_max') <= joints('acceleration_limit')), values
    assert joints('acceleration_max').max() > 0.0, 'the arm never accelerated'
    accepted = [m for m in harness.messages('trajectory') if m.points]
    assert all(len(p.accelerations) == 7 for m in accepted for p in m.points)


def test_gripper_commands_follow_the_policy_with_droid_sign(loop):
    harness, node, folder = loop
    commands = harness.wait_for(
        lambda: harness.messages('gripper'), TIMEOUT, 'a gripper command', node.log
    )
    # binary gripper on a Franka hand: 0.04 (open, policy 0) or 0.0 (closed, policy 1)
    assert {round(m.data, 6) for m in commands} <= {0.04, 0.0}
    # the simulated gripper joint moves to the commanded position
    target = commands[-1].data
    harness.wait_for(
        lambda: abs(harness.messages('states')[-1].position[7] - target) < 1e-3,
        10,
        'the gripper joint to reach its command',
        node.log,
    )


def test_gripper_action_without_control_msgs_fails_configure(tmp_path):
    pytest.importorskip('rclpy')
    try:
        import control_msgs  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip('control_msgs is installed here')
    node = NodeProcess(
        tmp_path / 'node.log',
        'engine.checkpoint:=/nonexistent',
        'engine.warmup:=false',
        'gripper.interface:=action',
        params_file=CONFIG / 'cpu_small.yaml',
    )
    assert node.wait_exit(60) != 0
    node.stop()
    assert 'gripper.interface action needs control_msgs' in node.log()
