# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Sensor subscriptions the node reads at its own pace instead of one callback per message.

Sensor topics can run far faster than the control loop: a Franka's joint_state_broadcaster
publishes at 1 kHz, cameras at 60 Hz. Waking the executor for every message costs a core of
Python and delays the inference thread, although the cache only ever needs the newest values.
A :class:`PolledSubscription` is never waited on by the executor (its callback group declines
every callback); the middleware keeps the newest ``depth`` messages of the topic (KEEP_LAST), and
the node takes them, at most ``depth`` at a time, once per control tick and right before it
builds an observation. Messages superseded in between are dropped by the middleware at no cost
to Python.
"""

from __future__ import annotations

from typing import Any

from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy


class PolledCallbackGroup(CallbackGroup):
    """A callback group whose entities the executor never runs: the node takes their data."""

    def can_execute(self, entity: Any) -> bool:
        """Never: keeps the entity out of the executor's wait set."""
        return False

    def beginning_execution(self, entity: Any) -> bool:
        """Never."""
        return False

    def ending_execution(self, entity: Any) -> None:
        """Nothing ran."""


def _not_called(msg: Any) -> None:  # the executor never runs a polled subscription
    raise AssertionError('polled subscription callback called')


#: ``reliability`` choices of :class:`PolledSubscription` -> the DDS policy.
RELIABILITY = {
    'best_effort': ReliabilityPolicy.BEST_EFFORT,
    'reliable': ReliabilityPolicy.RELIABLE,
}


class PolledSubscription:
    """A subscription keeping the newest ``depth`` messages until :meth:`take`.

    ``reliability``: ``best_effort`` (matches every publisher; large samples that lose a
    fragment are dropped whole) or ``reliable`` (lost fragments are resent; matches reliable
    publishers only).
    """

    def __init__(
        self,
        node: Node,
        msg_type: Any,
        topic: str,
        depth: int,
        reliability: str = 'best_effort',
    ) -> None:
        qos = QoSProfile(
            history=HistoryPolicy.KEEP_LAST,
            depth=depth,
            reliability=RELIABILITY[reliability],
            durability=DurabilityPolicy.VOLATILE,
        )
        self.topic = topic
        self.reliability = reliability
        self.node = node
        self.subscription = node.create_subscription(
            msg_type, topic, _not_called, qos, callback_group=PolledCallbackGroup()
        )

    def take(self) -> list[Any]:
        """The messages received since the last call, oldest first (at most ``depth``)."""
        subscription = self.subscription
        taken = []
        with subscription.handle:
            while True:
                result = subscription.handle.take_message(subscription.msg_type, False)
                if result is None:
                    return taken
                taken.append(result[0])

    def publisher_problem(self) -> str:
        """Why frames may not arrive, from the publishers' QoS (for a slow-input warning)."""
        publishers = self.node.get_publishers_info_by_topic(self.topic)
        if not publishers:
            return f'no publisher on {self.topic}'
        offers = {
            'best_effort'
            if info.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT
            else 'reliable'
            for info in publishers
        }
        if self.reliability == 'reliable' and offers == {'best_effort'}:
            return (
                f'the publishers of {self.topic} offer best_effort, which a reliable reader never '
                'matches: set camera_qos.reliability best_effort, or make the camera publish '
                'reliable'
            )
        if self.reliability == 'best_effort':
            return (
                f'a best_effort reader of {self.topic} loses large frames: set '
                'camera_qos.reliability reliable, or use compressed transport or DDS tuning '
                '(docs/policy_node.md, Cameras)'
            )
        return (
            f'{len(publishers)} publisher(s) on {self.topic} ({", ".join(sorted(offers))}): '
            'the camera may publish slower than camera_rates_hz, or the network drops frames'
        )

    def destroy(self) -> None:
        """Remove the subscription from the node."""
        self.node.destroy_subscription(self.subscription)
