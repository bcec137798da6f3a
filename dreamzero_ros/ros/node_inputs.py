# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The policy node's sensor inputs: cameras, joint states and a base's odometry, read by polling.

Made at configure from the settings and the policy's action groups, destroyed at cleanup. The
subscriptions are read once per control tick and before each query
(:mod:`~dreamzero_ros.ros.polled_inputs`), not one callback per message: :meth:`NodeInputs.read`
hands everything received since the last read to the control loop's observation cache, the
controller monitor and the plan views, and measures each camera's frame rate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nav_msgs.msg import Odometry
from rclpy.node import Node
from sensor_msgs.msg import CompressedImage, Image, JointState

from dreamzero_ros.core.config.node_settings import NodeSettings
from dreamzero_ros.core.control.control_loop import ControlLoop
from dreamzero_ros.core.observations.camera_rates import CameraRateMonitor
from dreamzero_ros.core.observations.observation_cache import Drop, Refusal
from dreamzero_ros.core.robot.action_groups import GroupLayout
from dreamzero_ros.ros.controller_monitor import ControllerMonitor
from dreamzero_ros.ros.plan_views import PlanViews
from dreamzero_ros.ros.polled_inputs import PolledSubscription

#: Joint state messages kept between two reads: one control period of a 1 kHz
#: joint_state_broadcaster at control rates down to 4 Hz, so that joint states split over
#: several publishers (arm, gripper) all reach the cache.
JOINT_STATE_QUEUE = 256


class NodeInputs:
    """The subscriptions of a configured node, and the cameras' measured frame rates."""

    def __init__(self, node: Node, settings: NodeSettings, groups: GroupLayout) -> None:
        compressed = settings.image_transport == 'compressed'
        self.cameras = {
            camera: PolledSubscription(
                node,
                CompressedImage if compressed else Image,
                f'{topic}/compressed' if compressed else topic,
                settings.camera_qos.depth,
                settings.camera_qos.reliability,
            )
            for camera, topic in settings.cameras.items()
        }
        self.camera_rates = CameraRateMonitor(settings.camera_rates)
        self._groups = groups
        self._joint_states = [
            PolledSubscription(node, JointState, topic, JOINT_STATE_QUEUE)
            for topic in groups.state_topics
        ]
        self._odometry: list[tuple[PolledSubscription, Any]] = [
            (PolledSubscription(node, Odometry, group.spec.odometry, 1), group)
            for group in groups.of('twist')
            if group.spec.odometry
        ]

    def read(
        self,
        now: float,
        loop: ControlLoop,
        controllers: ControllerMonitor,
        plan_views: PlanViews | None,
        note: Callable[[Refusal | Drop | None], None],
    ) -> None:
        """Hand the messages received since the last read on (``now``: their receipt).

        ``note`` gets what the cache said of each camera frame and joint state.
        """
        cache = loop.cache
        for camera, subscription in self.cameras.items():
            messages = subscription.take()
            self.camera_rates.record(camera, len(messages), now)
            for msg in messages:
                note(cache.add_image_message(camera, msg, now))
        for subscription in self._joint_states:
            for msg in subscription.take():
                note(cache.add_joint_state_message(msg, now))
                controllers.note_joint_state(msg)
                if plan_views is not None:
                    plan_views.note_joint_state(msg)
        first = len(self._groups.arm_joints) + len(self._groups.grippers)
        for subscription, group in self._odometry:
            for msg in subscription.take():
                velocities = controllers.odometry(group, msg)
                if velocities is not None:
                    columns = [column - first for column in group.columns]
                    loop.measured_velocities[columns] = velocities

    def publisher_problem(self, camera: str) -> str:
        """Why frames of ``camera`` may not arrive, from its publishers' QoS."""
        return self.cameras[camera].publisher_problem()

    def destroy(self) -> None:
        """Destroy every subscription."""
        for subscription in (
            *self.cameras.values(),
            *self._joint_states,
            *(subscription for subscription, _ in self._odometry),
        ):
            subscription.destroy()
