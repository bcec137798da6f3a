# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""ros_compat on both shapes of rclpy: Jazzy/Kilted's (this venv) and Humble's.

Humble's shape is this rclpy with what Humble lacks taken away: a node without pre-set and
post-set parameter callbacks, an rclpy without ``rclpy.event_handler`` whose ``rclpy.qos_event``
holds the event callback classes (as Humble's does).
"""

import subprocess
import sys
import time

import pytest
from rcl_interfaces.msg import SetParametersResult
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from dreamzero_ros.ros import ros_compat


class HumbleShapedNode(Node):
    """A node as Humble's rclpy makes it: on-set parameter callbacks only."""

    add_pre_set_parameters_callback = None
    add_post_set_parameters_callback = None


@pytest.fixture
def context():
    context = rclpy.Context()
    rclpy.init(context=context)
    yield context
    context.try_shutdown()


def _node_with_callbacks(node_type, context):
    """A node with a double ``gain`` (0..10) and the three callbacks; returns it and its log."""
    node = node_type('compat_parameters', context=context)
    node.declare_parameter('gain', 1.0)
    applied = []

    def widen(parameters):
        return [
            Parameter(p.name, Parameter.Type.DOUBLE, float(p.value))
            if p.type_ is Parameter.Type.INTEGER
            else p
            for p in parameters
        ]

    def check(parameters):
        ok = all(0.0 <= p.value <= 10.0 for p in parameters)
        return SetParametersResult(successful=ok, reason='' if ok else 'gain: out of [0, 10]')

    ros_compat.add_parameter_callbacks(node, widen, check, applied.append)
    return node, applied


@pytest.mark.parametrize('node_type', [Node, HumbleShapedNode], ids=['jazzy_kilted', 'humble'])
def test_parameter_callbacks_check_then_apply(node_type, context):
    node, applied = _node_with_callbacks(node_type, context)
    try:
        result = node.set_parameters([Parameter('gain', Parameter.Type.DOUBLE, 2.5)])[0]
        assert result.successful and node.get_parameter('gain').value == 2.5
        assert [[p.value for p in call] for call in applied] == [[2.5]]

        result = node.set_parameters([Parameter('gain', Parameter.Type.DOUBLE, 11.0)])[0]
        assert not result.successful and 'out of [0, 10]' in result.reason
        assert node.get_parameter('gain').value == 2.5 and len(applied) == 1
    finally:
        node.destroy_node()


def test_an_integer_for_a_double_is_widened_from_iron_on(context):
    node, applied = _node_with_callbacks(Node, context)
    try:
        assert node.set_parameters([Parameter('gain', Parameter.Type.INTEGER, 3)])[0].successful
        assert node.get_parameter('gain').type_ is Parameter.Type.DOUBLE
        assert applied[-1][0].value == 3.0
    finally:
        node.destroy_node()


def test_humble_refuses_an_integer_for_a_double_before_any_callback(context):
    node, applied = _node_with_callbacks(HumbleShapedNode, context)
    try:
        assert not node.set_parameters([Parameter('gain', Parameter.Type.INTEGER, 3)])[0].successful
        assert node.get_parameter('gain').value == 1.0 and not applied
    finally:
        node.destroy_node()


def test_event_callbacks_report_an_incompatible_qos_over_dds(context):
    node = Node('compat_events', context=context)
    incompatible = []
    node.create_subscription(
        String,
        'compat_events',
        lambda msg: None,
        QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE),
        event_callbacks=ros_compat.SubscriptionEventCallbacks(incompatible_qos=incompatible.append),
    )
    node.create_publisher(
        String, 'compat_events', QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
    )
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        deadline = time.monotonic() + 20.0
        while not incompatible and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        assert incompatible and incompatible[0].total_count >= 1
    finally:
        executor.shutdown()
        node.destroy_node()


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, timeout=60, check=False
    )


def test_event_callbacks_come_from_event_handler_without_the_deprecated_alias():
    result = _python(
        'import sys, warnings\n'
        "warnings.simplefilter('error')\n"
        'from dreamzero_ros.ros import ros_compat\n'
        'import rclpy.event_handler as real\n'
        'assert ros_compat.SubscriptionEventCallbacks is real.SubscriptionEventCallbacks\n'
        'assert ros_compat.PublisherEventCallbacks is real.PublisherEventCallbacks\n'
        "assert 'rclpy.qos_event' not in sys.modules\n"
    )
    assert result.returncode == 0, result.stderr


def test_event_callbacks_come_from_qos_event_on_humble():
    result = _python(
        'import sys\n'
        'import rclpy.event_handler as real\n'
        "sys.modules['rclpy.qos_event'] = real  # Humble's qos_event holds the classes\n"
        "sys.modules['rclpy.event_handler'] = None  # and Humble has no event_handler\n"
        'from dreamzero_ros.ros import ros_compat\n'
        'assert ros_compat.SubscriptionEventCallbacks is real.SubscriptionEventCallbacks\n'
        'assert ros_compat.PublisherEventCallbacks is real.PublisherEventCallbacks\n'
    )
    assert result.returncode == 0, result.stderr
