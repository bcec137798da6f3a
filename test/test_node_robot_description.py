# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The node takes its joint limits from robot_description, published by a peer process.

The peer publishes a Panda URDF as robot_state_publisher does (transient local, once, before the
node starts); a MoveIt-style joint_limits.yaml adds acceleration limits a quarter of the Panda's.
Every trajectory the node sends, followed as joint_trajectory_controller follows it (the
hand-over segment from the state at receipt included), stays within those limits. A typed limit
wider than the description, and a description that never comes, fail configure with a clear
message. Descriptions beyond the bounds (a 5000-link chain, 20k and 100k links, an origin at
1e300 m) fail configure and preflight in one line, before the kinematics library sees them.
"""

import subprocess
import sys

from closed_loop import ClosedLoop
from description_support import panda_with_chain
from node_support import CONFIG, REPO, NodeProcess, is_hold, ros_env
import numpy as np
import pytest
from test_core_robot_description import MOVEIT_LIMITS, panda_urdf

from dreamzero_ros.core.robot.panda import PANDA_MAX_ACCELERATION, PANDA_MAX_VELOCITY

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 120.0
LIMITS = np.array(PANDA_MAX_ACCELERATION) / 4  # MOVEIT_LIMITS' accelerations


@pytest.fixture(scope='module')
def system(tmp_path_factory):
    from trajectory_msgs.msg import JointTrajectory

    from dreamzero_ros.droid_clips import demo_clips

    folder = tmp_path_factory.mktemp('robot_description')
    (folder / 'joint_limits.yaml').write_text(MOVEIT_LIMITS)
    with ClosedLoop(folder, 'robot_description_harness') as loop:
        loop.publish_description(panda_urdf())
        harness = loop.harness
        # when the middleware received each trajectory (a loaded test process takes its
        # messages late, so the harness's own arrival times are no controller's receipt)
        received = []
        harness.node.create_subscription(
            JointTrajectory,
            'joint_trajectory_controller/joint_trajectory',
            lambda msg, info: received.append((info['received_timestamp'] * 1e-9, msg)),
            10,
        )
        node = loop.start_tiny_node(
            'robot_description.source:=topic',
            f'robot_description.joint_limits_file:={folder / "joint_limits.yaml"}',
            # rows 0.25 s apart: the random policy's steps need more than a quarter of the
            # Panda's accelerations at that pace, so that time scaling has work to do
            'scheduler.step_duration:=0.25',
            'scheduler.min_replan_period:=1.0',
            # a loaded test machine delivers some messages 80 ms after they are made
            'trajectory.handover_lead:=0.15',
        )
        loop.stream_cameras(demo_clips(30)[0], joint_states=True)
        yield harness, node, received


def test_trajectories_follow_the_descriptions_acceleration_limits(system):
    from dreamzero_ros.core.motion.jtc import TrajectoryFollower
    from dreamzero_ros.ros.conversions import trajectory_from_msg

    harness, node, receipts = system

    def motions():
        found = [m for _, m in receipts if not is_hold(m)]
        return found if len(found) >= 4 else None

    harness.wait_for(motions, TIMEOUT, '4 trajectories', node.log)
    assert 'joint limits of 7 arm joints from /robot_description' in node.log()
    received = list(receipts)
    first = trajectory_from_msg(received[0][1])
    arm = TrajectoryFollower(first.joint_names, np.array(first.points[0].positions))
    arm.accept(first, received[0][0])
    speed, acceleration = np.zeros(7), np.zeros(7)
    slowed, worst = 0, (0.0, 0, 0.0)
    for index, (arrived, msg) in enumerate(received):
        trajectory = trajectory_from_msg(msg)
        if index:
            arm.accept(trajectory, arrived)  # as JTC: replaces the one in force on receipt
        if not is_hold(msg):  # a motion: rows 0.25 s apart, or slowed
            gaps = np.diff([p.time_from_start for p in trajectory.points])
            slowed += bool(np.any(gaps > 0.25 + 1e-6))
        end = received[index + 1][0] if index + 1 < len(received) else harness.now()
        for t in np.arange(arrived, end, 0.002):
            arm.update(t)
            speed = np.maximum(speed, np.abs(arm.velocity))
            acceleration = np.maximum(acceleration, np.abs(arm.acceleration))
            worst = max(worst, (float(np.max(np.abs(arm.acceleration) / LIMITS)), index, t))
    assert slowed, 'no trajectory needed time scaling: the test shows nothing'
    assert np.all(speed <= np.array(PANDA_MAX_VELOCITY) * (1 + 1e-6)), speed
    ratio, index, at = worst
    where = [
        (round(arrived - at, 3), not is_hold(msg), len(msg.points))
        for arrived, msg in received[max(index - 2, 0) : index + 2]
    ]
    assert np.all(acceleration <= LIMITS * (1 + 1e-6)), (
        f'{ratio:.2f}x the limit on message {index} of {len(received)}, around: {where}; '
        f'{acceleration}\n{node.log()[-3000:]}'
    )


def _refused(folder, name, *args):
    node = NodeProcess(
        folder / f'{name}.log',
        'engine.checkpoint:=/nonexistent',
        'engine.warmup:=false',
        *args,
        params_file=CONFIG / 'cpu_small.yaml',
    )
    assert node.wait_exit(60) != 0
    return node.log()


def test_a_typed_limit_wider_than_the_description_fails_configure(tmp_path, closed_loop):
    closed_loop('wide_description_harness').publish_description(panda_urdf(), '/wide_description')
    log = _refused(
        tmp_path,
        'wide',
        'robot_description.source:=topic',
        'robot_description.topic:=/wide_description',
        'safety.max_velocity:=[2.0, 2.0, 2.0, 2.5, 2.0, 2.0, 2.0]',
    )
    assert (
        "safety.max_velocity[3] = 2.5 for joint 'panda_joint4' is wider than the robot "
        "description's max_velocity 2.175" in log
    ), log


def test_a_description_that_never_comes_fails_configure(tmp_path):
    log = _refused(
        tmp_path,
        'absent',
        'robot_description.source:=topic',
        'robot_description.topic:=/nobody_publishes_this',
        'robot_description.timeout:=1.0',
    )
    assert 'no robot description on /nobody_publishes_this within 1.0 s' in log, log


def test_a_description_file_without_a_configured_joint_fails_configure(tmp_path):
    urdf = tmp_path / 'fr3.urdf'
    urdf.write_text(panda_urdf().replace('panda_joint7', 'fr3_joint7'))
    log = _refused(
        tmp_path, 'file', 'robot_description.source:=file', f'robot_description.file:={urdf}'
    )
    assert f"robot description 'panda' ({urdf}) has no joint 'panda_joint7'" in log, log


# The packaged Panda with a chain of fixed links from its hand (on main: SIGSEGV in the URDF
# loader at 5000, minutes at 20k), and with one joint origin at 1e300 m (on main: configure
# passed and the first chunk's envelope check raised).
PANDA_LINKS = 14
BOUNDED = {
    'chain_5000': (
        lambda: panda_with_chain(5000),
        f'has {5001 + PANDA_LINKS} links; at most 1000 are accepted (robot_description.max_links)',
    ),
    'chain_20k': (
        lambda: panda_with_chain(20_000),
        f'has {20_001 + PANDA_LINKS} links; at most 1000 are accepted',
    ),
    'chain_100k': (lambda: panda_with_chain(100_000), 'bytes (robot_description.max_bytes)'),
}


def _far_origin_urdf() -> str:
    """The packaged Panda with one joint origin at x = 1e300 m."""
    from importlib import resources

    text = (resources.files('dreamzero_ros') / 'descriptions' / 'panda.urdf').read_text()
    start = text.index('<origin', text.index('<joint name="panda_joint4"'))
    end = text.index('/>', start)
    return text[:start] + '<origin rpy="0 0 0" xyz="1e300 0 0"' + text[end:]


BOUNDED['origin_1e300'] = (
    _far_origin_urdf,
    '<origin xyz="1e300 0 0"> of joint \'panda_joint4\' is beyond +-1000 '
    '(robot_description.max_length)',
)


@pytest.mark.parametrize('case', sorted(BOUNDED))
def test_descriptions_beyond_the_bounds_fail_configure_and_preflight_in_one_line(tmp_path, case):
    make, message = BOUNDED[case]
    urdf = tmp_path / f'{case}.urdf'
    urdf.write_text(make())
    settings = (
        'robot_description.source:=file',
        f'robot_description.file:={urdf}',
        'envelope.enabled:=true',  # the kinematics library would load it
    )
    node = NodeProcess(
        tmp_path / 'node.log',
        'engine.checkpoint:=/nonexistent',
        'engine.warmup:=false',
        *settings,
        params_file=CONFIG / 'cpu_small.yaml',
    )
    code = node.wait_exit(60)
    log = node.log()
    assert code == 1, (code, log[-2000:])  # an orderly exit, never SIGSEGV (-11)
    failures = [line for line in log.splitlines() if 'configure failed:' in line]
    assert len(failures) == 1 and message in failures[0], log[-2000:]
    command = [sys.executable, '-m', 'dreamzero_ros.ros.preflight', '--duration', '0.1']
    command += ['--discovery-timeout', '0.1']  # nothing publishes: the description is checked
    command += ['--params-file', str(CONFIG / 'cpu_small.yaml')]
    for item in settings:
        command += ['-p', item]
    result = subprocess.run(
        command, cwd=REPO, env=ros_env(), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    (line,) = [line for line in result.stdout.splitlines() if 'robot description:' in line]
    assert line.startswith('[FAIL] robot description: ') and message in line, result.stdout
