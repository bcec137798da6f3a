# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The robot description for the policy node: from robot_state_publisher's topic or a file.

robot_state_publisher publishes the URDF on ``/robot_description`` (std_msgs/String, reliable,
transient local: a late subscriber still gets it). :func:`load_description` reads it at
configure, from the topic (waiting up to ``robot_description.timeout``) or from
``robot_description.file``, and overlays ``robot_description.joint_limits_file``.
:class:`DescriptionWatch` hands the node each different description published later.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
import time

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from dreamzero_ros.core.config.node_parameters import RobotDescriptionSettings
from dreamzero_ros.core.robot.robot_description import RobotDescription
from dreamzero_ros.ros.polled_inputs import PolledCallbackGroup

#: robot_state_publisher's QoS for the description.
DESCRIPTION_QOS = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
#: Seconds between two looks for the description while waiting.
_POLL = 0.05


def _not_called(msg: String) -> None:  # the executor never runs this subscription
    raise AssertionError('robot description callback called')


def receive_description(
    node: Node, topic: str, timeout: float, stop: Callable[[], bool] = lambda: False
) -> str | None:
    """The URDF published on ``topic``, waiting up to ``timeout`` s; None if none arrived.

    Reads the subscription directly, so that it works inside a lifecycle transition (the
    executor is busy running it).
    """
    subscription = node.create_subscription(
        String, topic, _not_called, DESCRIPTION_QOS, callback_group=PolledCallbackGroup()
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            with subscription.handle:
                taken = subscription.handle.take_message(String, False)
            if taken is not None:
                return taken[0].data
            if time.monotonic() >= deadline or stop():
                return None
            time.sleep(_POLL)
    finally:
        node.destroy_subscription(subscription)


class DescriptionWatch:
    """Descriptions published on ``topic`` after configure, each different one to ``on_new``.

    ``on_new(urdf)`` runs on the node's executor, as any subscription callback; the transient
    local sample read at configure (``current``) and repeats of the last one are not handed on.
    """

    def __init__(self, node: Node, topic: str, current: str, on_new: Callable[[str], None]) -> None:
        self._node = node
        self._last = current
        self._on_new = on_new
        self._subscription = node.create_subscription(String, topic, self._receive, DESCRIPTION_QOS)

    def _receive(self, msg: String) -> None:
        if msg.data != self._last:
            self._last = msg.data
            self._on_new(msg.data)

    def destroy(self) -> None:
        """Stop watching."""
        self._node.destroy_subscription(self._subscription)


def load_description(
    node: Node, settings: RobotDescriptionSettings, stop: Callable[[], bool] = lambda: False
) -> RobotDescription | None:
    """The robot description ``settings`` name; None for source ``none``.

    Raises:
        ValueError: nothing on the topic within the timeout, an unreadable file, or a
            description or joint_limits.yaml that does not parse.

    """
    if settings.source == 'none':
        return None
    limits_file = settings.joint_limits_file or None
    if settings.source == 'file':
        return RobotDescription.read(settings.file, limits_file, settings.bounds)
    topic = node.resolve_topic_name(settings.topic)
    urdf = receive_description(node, settings.topic, settings.timeout, stop)
    if urdf is None:
        raise ValueError(
            f'no robot description on {topic} within {settings.timeout:.1f} s (is '
            'robot_state_publisher running? or set robot_description.source)'
        )
    try:
        limits = None if limits_file is None else Path(limits_file).read_text()
    except OSError as error:
        raise ValueError(f'robot_description.joint_limits_file: {error}') from None
    return RobotDescription.parse(urdf, limits, source=topic, bounds=settings.bounds)
