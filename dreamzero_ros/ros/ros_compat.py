# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The rclpy API the package uses where ROS 2 Humble differs from Jazzy and Kilted.

Checked against rclpy's humble and jazzy branches and Kilted's rclpy (docs/ros_distributions.md);
everything else the nodes use (lifecycle node and publishers, action server, time-jump callbacks,
executors, parameter descriptors) has the same shape on all three.

- QoS event callbacks live in ``rclpy.event_handler`` from Iron on and in ``rclpy.qos_event`` on
  Humble (Jazzy and Kilted keep ``qos_event`` as a deprecated alias that warns on import).
- Pre-set and post-set parameter callbacks exist from Iron on; Humble has only on-set callbacks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

try:
    from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
except ImportError:  # Humble
    from rclpy.qos_event import PublisherEventCallbacks, SubscriptionEventCallbacks

__all__ = ['PublisherEventCallbacks', 'SubscriptionEventCallbacks', 'add_parameter_callbacks']


def add_parameter_callbacks(
    node: Any,
    pre_set: Callable[[list], list],
    on_set: Callable[[list], Any],
    post_set: Callable[[list], None],
) -> None:
    """Register a node's pre-set, on-set and post-set parameter callbacks.

    Jazzy and Kilted: as rclpy's three kinds. Humble, with on-set callbacks only: one on-set
    callback runs ``pre_set`` (rclpy has already refused a value of another type than the
    declared one, so an integer for a double is refused there: write ``1.0``), then ``on_set``
    on its result, then, when that accepts, ``post_set`` (before rclpy stores the values).
    """
    add_pre = getattr(node, 'add_pre_set_parameters_callback', None)
    add_post = getattr(node, 'add_post_set_parameters_callback', None)
    if add_pre is not None and add_post is not None:
        add_pre(pre_set)
        node.add_on_set_parameters_callback(on_set)
        add_post(post_set)
        return

    def checked_then_applied(parameters: list) -> Any:
        parameters = pre_set(parameters)
        result = on_set(parameters)
        if result.successful:
            post_set(parameters)
        return result

    node.add_on_set_parameters_callback(checked_then_applied)
