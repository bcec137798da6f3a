# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The policy node drives the simulated arm over real DDS; the arm's joint states close the loop.

Three processes: the policy node (tiny engine, commands enabled), ``dreamzero-sim-arm`` with a
7-joint joint_trajectory_controller configuration, and this harness, which publishes the camera
streams only (the joint states come from the simulated arm) and records both sides.
"""

from closed_loop import ClosedLoop
from node_support import ARM, is_hold, node_diagnostics
import numpy as np
import pytest

from dreamzero_ros.core.control.command_check import FRANKA_ERRORS
from dreamzero_ros.core.observations.messages import stamp_seconds

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
    with ClosedLoop(folder, 'closed_loop_harness') as loop:
        harness = loop.harness
        harness.record(
            'trajectory', JointTrajectory, 'joint_trajectory_controller/joint_trajectory'
        )
        harness.record('rejected', String, '/sim_arm/rejected')
        harness.record('states', JointState, 'joint_states')
        harness.record('gripper', Float64, 'gripper/command')
        harness.record('diagnostics', DiagnosticArray, '/diagnostics')
        loop.start_sim('gripper.interface:=float64', 'gripper.name:=gripper/command')
        loop.start_node(
            f'engine.checkpoint:={checkpoint}',
            'engine.warmup:=false',
            'engine.num_threads:=1',
            'gripper.interface:=float64',
            'gripper.command_name:=gripper/command',
            # the tiny engine answers in ~0.1 s: space the chunks so that points are reached
            'scheduler.step_duration:=0.5',
            'scheduler.min_replan_period:=1.5',
            # on a loaded machine a trajectory may take longer than the default 50 ms to reach
            # the arm: the hand-over point lies further ahead (what a slow link would configure)
            'trajectory.handover_lead:=0.25',
        )
        loop.stream_cameras(demo_clips(30)[0])
        yield loop


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
    harness, node, log = loop.harness, loop.node, loop.log

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
    stamps = np.array([stamp_seconds(s.header.stamp) for s in states])
    positions = np.array([s.position[:7] for s in states])
    assert list(states[-1].name[:7]) == ARM
    accepted = _accepted_by(harness)
    everything = list(harness.received['trajectory'])  # holds (stamp 0) replace a motion at once
    reached = 0
    for index, (_, msg) in enumerate(everything):
        if not msg.header.stamp.sec:
            continue
        start = stamp_seconds(msg.header.stamp)
        # the arm's acceptance: points due before it are skipped, as JTC does with a late goal
        taken = accepted(index + 1)
        # the next trajectory may reach the arm before the harness, not before its own stamp
        replaced = np.inf
        if index + 1 < len(everything):
            arrived, following = everything[index + 1]
            replaced = min(arrived, stamp_seconds(following.header.stamp) or np.inf)
        for point in msg.points:
            at = start + stamp_seconds(point.time_from_start)
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
    """The simulated arm checks its 1 kHz command as a Franka does (core/control/command_check)."""
    harness, log = loop.harness, loop.log

    def motions():
        found = [m for m in harness.messages('trajectory') if not is_hold(m)]
        return found if len(found) >= 4 else None

    harness.wait_for(motions, TIMEOUT, '4 trajectories', log)
    since = harness.now() + 1.5  # a report after the last of them was followed a while

    status, values = harness.wait_for(
        lambda: node_diagnostics(harness, since, name='sim_arm'), 10, 'a sim arm report', log
    )

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
    harness, node = loop.harness, loop.node
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


def test_gripper_action_without_control_msgs_fails_configure(closed_loop):
    pytest.importorskip('rclpy')
    try:
        import control_msgs  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip('control_msgs is installed here')
    node = closed_loop('gripper_check_harness').start_node(
        'engine.checkpoint:=/nonexistent', 'engine.warmup:=false', 'gripper.interface:=action'
    )
    assert node.wait_exit(60) != 0
    assert 'gripper.interface action needs control_msgs' in node.log()
