# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The robot description (URDF text) a node needs: from a file, or the robot_description topic."""

from __future__ import annotations

from pathlib import Path

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.wait_for_message import wait_for_message
from std_msgs.msg import String

#: How robot_state_publisher publishes the description: latched.
DESCRIPTION_QOS = QoSProfile(
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)


def read_robot_description(
    node: Node, path: str, timeout: float, topic: str = 'robot_description'
) -> str:
    """The URDF in ``path``, or else the one latched on ``topic`` (waiting up to ``timeout`` s).

    Callable from a callback: the wait uses its own wait set, not the node's executor.

    Raises:
        ValueError: the file cannot be read, or nothing arrived on the topic in time.

    """
    if path:
        try:
            return Path(path).read_text()
        except OSError as error:
            raise ValueError(f'robot_description_file {path!r}: {error}') from None
    received, message = wait_for_message(
        String, node, topic, qos_profile=DESCRIPTION_QOS, time_to_wait=timeout
    )
    if not received or not message.data:
        raise ValueError(
            f'no robot description on {node.resolve_topic_name(topic)} within {timeout:g} s '
            '(start robot_state_publisher, or set robot_description_file)'
        )
    return message.data
