# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The plan in 3D from a running node, over DDS, against pinocchio on the packaged Panda URDF.

Four processes, as in test/test_envelope_dds.py: a scripted OpenPI policy lowering the hand
towards the table (test/policy_peer.py), ``dreamzero-sim-arm`` (the Panda URDF on
``robot_description``, ``joint_states``, a table 0.3 m up), the policy node (remote engine,
``envelope.enabled`` with a keep-out box) and this harness. The node must publish on
``~/plan_path`` the flange path of exactly the rows the controller got (after the envelope cut),
on ``~/executed_path`` a path that grows with the measured joints, and the envelope as latched
markers a late subscriber still receives.
"""

from importlib import resources

from closed_loop import hand_toward_the_table
from node_support import is_hold
import numpy as np
import pytest

from dreamzero_ros.core.observations.messages import stamp_seconds

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 120.0
TABLE = 0.3
KEEP_OUT = (0.6, -0.6, 0.0, 0.9, -0.3, 0.4)
ARM = [f'panda_joint{i}' for i in range(1, 8)]
FRAME = 'panda_link0'
PREFIX = '/dreamzero_policy'


def _positions(path) -> np.ndarray:
    return np.array([[p.pose.position.x, p.pose.position.y, p.pose.position.z]
                     for p in path.poses]).reshape(-1, 3)  # fmt: skip


def _path_of(paths, msg):
    """The plan path whose pose stamps are the rows' times of trajectory ``msg``."""
    start = stamp_seconds(msg.header.stamp)
    times = [start + stamp_seconds(p.time_from_start) for p in msg.points]
    for path in paths:
        stamps = [stamp_seconds(pose.header.stamp) for pose in path.poses]
        if len(stamps) == len(times) and np.allclose(stamps, times, rtol=0, atol=1e-6):
            return path
    return None


def test_plan_executed_path_and_envelope_reach_subscribers(closed_loop):
    from nav_msgs.msg import Path
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory
    from visualization_msgs.msg import MarkerArray

    from dreamzero_ros.core.robot.kinematics import LinkPoints
    from dreamzero_ros.ros.plan_views import LATCHED

    urdf = (resources.files('dreamzero_ros') / 'descriptions' / 'panda.urdf').read_text()
    flange = LinkPoints(urdf, ARM, ('panda_link8',), frame=FRAME)
    loop = closed_loop('plan_harness')
    harness, log = loop.harness, loop.log
    harness.record('trajectory', JointTrajectory, 'joint_trajectory_controller/joint_trajectory')
    harness.record('states', JointState, 'joint_states')
    harness.record('plan', Path, f'{PREFIX}/plan_path')
    harness.record('executed', Path, f'{PREFIX}/executed_path')
    overrides = hand_toward_the_table(loop, TABLE)
    harness.wait_for(lambda: harness.messages('states'), 30, 'the simulated arm', log)
    loop.start_node(*overrides, f'envelope.keep_out:={list(KEEP_OUT)}')

    def matched():
        motions = [m for m in harness.messages('trajectory') if not is_hold(m)]
        pairs = [(m, _path_of(harness.messages('plan'), m)) for m in motions]
        return pairs if len(pairs) >= 2 and all(p for _, p in pairs[:2]) else None

    pairs = harness.wait_for(matched, TIMEOUT, 'two trajectories and their plan paths', log)
    for msg, path in pairs[:2]:
        assert list(msg.joint_names) == ARM
        assert path.header.frame_id == FRAME
        assert all(pose.header.frame_id == FRAME for pose in path.poses)
        rows = np.array([p.positions for p in msg.points])
        np.testing.assert_allclose(
            _positions(path), flange.positions(rows)[:, 0], rtol=0, atol=1e-9
        )
    # the first motion was cut at the table: its path is the cut one, braking above it
    assert len(pairs[0][0].points) < 24, len(pairs[0][0].points)

    # the executed path grows as the arm moves, the flange of the measured joints
    executed = harness.wait_for(
        lambda: len({len(m.poses) for m in harness.messages('executed')}) >= 3 or None,
        30, 'a growing executed path', log,
    )  # fmt: skip
    sizes = [len(m.poses) for m in harness.messages('executed')]
    assert sizes == sorted(sizes) and sizes[-1] > sizes[0], sizes
    last = harness.messages('executed')[-1]
    assert last.header.frame_id == FRAME
    states = {round(stamp_seconds(m.header.stamp), 6): m for m in harness.messages('states')}
    stamp = round(stamp_seconds(last.poses[-1].header.stamp), 6)
    assert stamp in states, (stamp, executed)
    measured = np.array(states[stamp].position[:7])
    np.testing.assert_allclose(
        _positions(last)[-1], flange.positions(measured)[0, 0], rtol=0, atol=1e-9
    )

    # a subscriber arriving late still gets the envelope: box, table, keep-out box
    harness.record('envelope', MarkerArray, f'{PREFIX}/envelope', LATCHED)
    markers = harness.wait_for(
        lambda: harness.messages('envelope'), 30, 'the latched envelope', log
    )[0].markers
    assert [len(m.points) for m in markers] == [24, 8, 24]
    assert all(m.header.frame_id == FRAME and m.ns == 'dreamzero_envelope' for m in markers)
    table = np.array([[p.x, p.y, p.z] for p in markers[1].points])
    np.testing.assert_allclose(table[:, 2], TABLE)
    np.testing.assert_allclose(table[:, :2].min(axis=0), [-1.0, -1.0])
    box = np.array([[p.x, p.y, p.z] for p in markers[2].points])
    np.testing.assert_allclose(box.min(axis=0), KEEP_OUT[:3])
    np.testing.assert_allclose(box.max(axis=0), KEEP_OUT[3:])


def test_a_plan_link_the_description_lacks_fails_configure(closed_loop):
    # envelope off: the configured description file alone makes the node build the plan views
    urdf = resources.files('dreamzero_ros') / 'descriptions' / 'panda.urdf'
    node = closed_loop('plan_link_harness').start_node(
        'engine.checkpoint:=/nonexistent',
        'engine.warmup:=false',
        'robot_description.source:=file',
        f'robot_description.file:={urdf}',
        'plan.link:=tool0',
    )
    assert node.wait_exit(60) != 0, node.log()
    assert "robot description has no link 'tool0'" in node.log(), node.log()
    assert 'loading DreamZero' not in node.log()  # refused before the engine is touched
