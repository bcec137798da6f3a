# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The plan in 3D: end-effector paths through a forward-kinematics callable, over DDS.

The forward kinematics here is a planar two-link arm written for the test; the node plugs in
the robot description's kinematics instead.
"""

import threading

from node_support import Harness
import numpy as np
import pytest

from dreamzero_ros.core.motion.envelope import EnvelopeConfig
from dreamzero_ros.core.motion.plan_geometry import (
    ExecutedPath,
    box_edges,
    description_fk,
    end_effector_path,
    envelope_outline,
)

LINKS = (0.4, 0.3)


def planar_fk(joints: np.ndarray) -> np.ndarray:
    """Two revolute joints about z, links of LINKS metres, at 0.3 m height."""
    a, b = joints[0], joints[0] + joints[1]
    return np.array([LINKS[0] * np.cos(a) + LINKS[1] * np.cos(b),
                     LINKS[0] * np.sin(a) + LINKS[1] * np.sin(b), 0.3])  # fmt: skip


def test_end_effector_path_follows_the_forward_kinematics():
    rows = np.array([[0.0, 0.0], [np.pi / 2, 0.0], [0.0, np.pi / 2]])
    np.testing.assert_allclose(
        end_effector_path(planar_fk, rows), [[0.7, 0, 0.3], [0, 0.7, 0.3], [0.4, 0.3, 0.3]],
        atol=1e-12,
    )  # fmt: skip
    with pytest.raises(ValueError, match='finite'):
        end_effector_path(lambda q: np.full(3, np.nan), rows)
    with pytest.raises(ValueError, match='rows'):
        end_effector_path(planar_fk, np.zeros(2))


def test_executed_path_is_bounded_and_skips_a_resting_arm():
    path = ExecutedPath(planar_fk, max_points=3, min_distance=0.01)
    assert path.add(0.0, np.zeros(2)) and not path.add(0.1, np.zeros(2))
    for index in range(1, 5):
        assert path.add(float(index), np.array([0.1 * index, 0.0]))
    assert list(path.times) == [2.0, 3.0, 4.0] and path.points.shape == (3, 3)


def test_box_edges_outline_the_envelope():
    edges = box_edges(np.array([0.0, -0.5, 0.0]), np.array([0.8, 0.5, 1.0]))
    assert edges.shape == (12, 2, 3)
    lengths = sorted(np.round(np.linalg.norm(edges[:, 1] - edges[:, 0], axis=1), 9))
    assert lengths == [0.8] * 4 + [1.0] * 8
    with pytest.raises(ValueError, match='lower < upper'):
        box_edges(np.ones(3), np.zeros(3))


def test_envelope_outline_draws_box_table_and_keep_out():
    config = EnvelopeConfig(table_height=0.2, keep_out=(((0.5, 0.5, 0.0), (0.7, 0.8, 0.3)),))
    parts = envelope_outline(config)
    assert {name: part.shape for name, part in parts.items()} == {
        'workspace': (12, 2, 3), 'table': (4, 2, 3), 'keep_out': (12, 2, 3),
    }  # fmt: skip
    table = parts['table'].reshape(-1, 3)
    np.testing.assert_allclose(table[:, 2], 0.2)
    np.testing.assert_allclose(
        [table[:, :2].min(axis=0), table[:, :2].max(axis=0)], [[-1, -1], [1, 1]]
    )
    np.testing.assert_allclose(parts['keep_out'].reshape(-1, 3).max(axis=0), [0.7, 0.8, 0.3])
    # a table below the workspace box and no keep-out box: the box alone
    assert list(envelope_outline(EnvelopeConfig(table_height=-0.6))) == ['workspace']


def test_description_fk_is_the_flange_of_the_panda_urdf():
    from importlib import resources

    urdf = (resources.files('dreamzero_ros') / 'descriptions' / 'panda.urdf').read_text()
    arm = tuple(f'panda_joint{i}' for i in range(1, 8))
    fk, frame = description_fk(urdf, arm, 'panda_link8', 'panda_link0')
    assert frame == 'panda_link0'
    # all joints zero (the URDF's joint origins): up 0.333 + 0.316 + 0.384 m to link 7, out
    # 0.0825 - 0.0825 + 0.088 m, then the flange 0.107 m below it (pointing down)
    np.testing.assert_allclose(fk(np.zeros(7)), [0.088, 0.0, 0.926], atol=1e-9)
    root_fk, root = description_fk(urdf, arm, 'panda_link8')
    assert root == 'base'
    np.testing.assert_allclose(root_fk(np.zeros(7)), fk(np.zeros(7)), atol=1e-9)
    with pytest.raises(ValueError, match="no link 'tool0'"):
        description_fk(urdf, arm, 'tool0', 'panda_link0')


def test_paths_and_envelope_reach_a_subscriber_over_dds():
    from nav_msgs.msg import Path
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from visualization_msgs.msg import MarkerArray

    from dreamzero_ros.ros.plan_views import LATCHED, PlanViews

    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node('dreamzero_policy', context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    harness = Harness('plan_harness')
    try:
        envelope = box_edges(np.array([0.0, -0.5, 0.0]), np.array([0.8, 0.5, 1.0]))
        views = PlanViews(node, planar_fk, 'panda_link0', {'workspace': envelope})
        harness.record('plan', Path, '/dreamzero_policy/plan_path')
        harness.record('executed', Path, '/dreamzero_policy/executed_path')
        harness.record('envelope', MarkerArray, '/dreamzero_policy/envelope', LATCHED)
        topics = ('/dreamzero_policy/plan_path', '/dreamzero_policy/executed_path')
        harness.wait_for(
            lambda: all(node.count_subscribers(t) for t in topics), 10, 'subscribers', lambda: ''
        )
        rows = np.array([[0.0, 0.0], [0.2, 0.1], [0.4, 0.2]])
        times = 100.0 + np.arange(3) * 0.5
        views.on_plan(100.0, times, rows)
        for index, row in enumerate(rows):
            views.on_joints(100.0 + index, row)
        plan = harness.wait_for(lambda: harness.messages('plan'), 10, 'a plan path', lambda: '')
        msg = plan[0]
        assert msg.header.frame_id == 'panda_link0' and len(msg.poses) == 3
        got = np.array([[p.pose.position.x, p.pose.position.y, p.pose.position.z]
                        for p in msg.poses])  # fmt: skip
        np.testing.assert_allclose(got, end_effector_path(planar_fk, rows), atol=1e-12)
        stamps = [p.header.stamp.sec + p.header.stamp.nanosec * 1e-9 for p in msg.poses]
        np.testing.assert_allclose(stamps, times, atol=1e-6)
        executed = harness.wait_for(
            lambda: [m for m in harness.messages('executed') if len(m.poses) == 3],
            10, 'the executed path', lambda: '',
        )  # fmt: skip
        assert executed[0].header.frame_id == 'panda_link0'
        markers = harness.wait_for(
            lambda: harness.messages('envelope'), 10, 'the envelope', lambda: ''
        )
        assert len(markers[0].markers[0].points) == 24
    finally:
        harness.close()
        executor.shutdown()
        node.destroy_node()
        context.try_shutdown()


def test_plan_frames_fall_back_from_the_panda_defaults_on_another_robot():
    from dreamzero_ros.core.motion.plan_geometry import plan_frames

    urdf = (
        '<robot name="r"><link name="base"/><link name="a"/><link name="b"/>'
        '<joint name="j1" type="revolute"><parent link="base"/><child link="a"/>'
        '<limit lower="-1" upper="1" velocity="1" effort="1"/></joint>'
        '<joint name="j2" type="revolute"><parent link="a"/><child link="b"/>'
        '<limit lower="-1" upper="1" velocity="1" effort="1"/></joint></robot>'
    )
    assert plan_frames(urdf, ('j1', 'j2'), 'panda_link8', 'panda_link0') == ('b', '')
    assert plan_frames(urdf, ('j1', 'j2'), 'a', 'base') == ('a', 'base')
    # a name set on purpose is kept, and refused later by the kinematics
    assert plan_frames(urdf, ('j1', 'j2'), 'tool0', 'world') == ('tool0', 'world')
