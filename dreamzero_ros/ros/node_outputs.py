# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What the policy node publishes: the preview, raw chunks, per-step and controller commands.

Made at configure, destroyed at cleanup. Every plan goes to the preview topic; to the controllers
(:class:`~dreamzero_ros.ros.group_outputs.GroupOutputs`, one output per action group) only while
the node is commanding. A plan's trajectory carries positions, velocities and accelerations at
each point, so that the controller draws the plan's own quintic segments; a one-point hold goes
out with a zero stamp, started on receipt from the controller's state then. The plan views
(:mod:`~dreamzero_ros.ros.plan_views`) see each plan after the trajectory went out.
"""

from __future__ import annotations

import time

import numpy as np
from rclpy.lifecycle import LifecycleNode
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from dreamzero_ros.core.config.node_settings import NodeSettings
from dreamzero_ros.core.control.control_loop import ChunkOutcome, Query
from dreamzero_ros.core.control.repeat_limiter import RepeatLimiter
from dreamzero_ros.core.motion.chunk_scheduler import ActionPlan
from dreamzero_ros.core.observations.messages import to_ns
from dreamzero_ros.core.robot.action_groups import GroupLayout
from dreamzero_ros.policy_types import ActionChunk
from dreamzero_ros.ros import conversions
from dreamzero_ros.ros.conversions import ROS_MESSAGES, ActionChunkMsg
from dreamzero_ros.ros.group_outputs import GroupOutputs
from dreamzero_ros.ros.plan_views import PlanViews

#: Longest wait, seconds, for the controller to acknowledge a last hold before going inactive.
DELIVERY_TIMEOUT = 0.25


class NodeOutputs:
    """The publishers of a configured node, its controllers' outputs and its plan views."""

    def __init__(
        self,
        node: LifecycleNode,
        settings: NodeSettings,
        groups: GroupLayout,
        warnings: RepeatLimiter,
    ) -> None:
        """Create the outputs (lifecycle publishers: they publish while the node is active).

        Raises:
            RuntimeError: an action output where control_msgs is not installed.

        """
        self._node = node
        self._settings = settings
        self._groups = groups
        self._warnings = warnings
        #: The robot's controllers, one per action group.
        self.controllers = GroupOutputs(node, groups)
        #: The plan in 3D where the robot description is read (replaced when it changes).
        self.plan_views: PlanViews | None = None
        self._preview = node.create_lifecycle_publisher(JointTrajectory, settings.preview_topic, 10)
        self._chunks = (
            node.create_lifecycle_publisher(ActionChunkMsg, settings.chunk_topic, 10)
            if ActionChunkMsg
            else None
        )
        self._steps = None
        if settings.step_command.enabled:
            step_type = (
                JointState if settings.step_command.type == 'joint_state' else Float64MultiArray
            )
            self._steps = node.create_lifecycle_publisher(
                step_type, settings.step_command.topic, 10
            )

    def publish_chunk(
        self, query: Query, chunk: ActionChunk, outcome: ChunkOutcome, commanding: bool
    ) -> bool:
        """Publish the raw chunk and the trajectory (or a hold); True if a trajectory went out."""
        names = self._groups.command_names
        stamp = query.observation.stamp
        if self._chunks is not None and np.asarray(chunk.actions).ndim == 2:
            self._chunks.publish(
                ROS_MESSAGES.action_chunk(
                    to_ns(stamp),
                    names,
                    self._groups.to_joint_units(chunk.actions),
                    to_ns(self._settings.scheduler.step_duration or chunk.step_duration),
                    chunk.chunk_id,
                    outcome.latency,
                    query.observation.session_id,
                )
            )
        logger = self._node.get_logger()
        if outcome.discarded:  # one line per kind and period (counted in diagnostics)
            kind = f'chunk not used: {outcome.discarded.partition(" (")[0]}'
            suffix = self._warnings.admit(kind, time.monotonic())
            if suffix is not None:
                logger.warning(f'chunk not used: {outcome.discarded}{suffix}')
            self.publish_hold(outcome.plan, commanding)
            return False
        if outcome.envelope is not None:
            logger.warning(f'trajectory cut into a hold: {outcome.envelope}')
        self.send_plan(outcome.plan, stamp, commanding)
        logger.debug(
            f'chunk {chunk.chunk_id}: latency {outcome.latency * 1000:.0f} ms, '
            f'{outcome.dropped_steps} past steps dropped, blend {outcome.blend_window:.2f} s'
        )
        return True

    def send_plan(self, plan: ActionPlan, stamp: float, commanding: bool) -> None:
        """Publish ``plan`` stamped ``stamp``: the preview; the controllers when commanding."""
        arm_names = self._groups.arm_joints
        arm = len(arm_names)
        stamp_ns = to_ns(stamp)
        times = [to_ns(time) - stamp_ns for time in plan.times]
        velocities, accelerations = (
            np.zeros_like(plan.rows) if values is None else values
            for values in (plan.velocities, plan.accelerations)
        )
        msg = ROS_MESSAGES.trajectory(
            stamp_ns,
            arm_names,
            times,
            plan.rows[:, :arm],
            velocities[:, :arm],
            accelerations[:, :arm],
        )
        self._preview.publish(msg)
        if commanding:
            self.controllers.send_trajectory(
                lambda group: ROS_MESSAGES.trajectory(
                    stamp_ns,
                    group.spec.joints,
                    times,
                    group.rows(plan.rows),
                    group.rows(velocities),
                    group.rows(accelerations),
                )
            )
        if self.plan_views is not None:  # after the trajectory
            self.plan_views.on_plan(stamp, plan.times, plan.rows[:, :arm])

    def publish_hold(self, plan: ActionPlan | None, commanding: bool) -> None:
        """Send a hold plan to the preview, and to the controllers when ``commanding``.

        A braking hold (several points, starting on the plan in force) goes out as a stamped
        trajectory like a chunk's; a one-point hold (a plan at rest) with a zero stamp.
        """
        if plan is None:
            return
        if len(plan.times) > 1:
            self.send_plan(plan, plan.start_time, commanding)
            if commanding:
                self.controllers.stop_bases()
            return
        arm_names = self._groups.arm_joints
        settle = 1.0 / self._settings.control_rate_hz
        msg = ROS_MESSAGES.hold(arm_names, plan.rows[-1][: len(arm_names)], to_ns(settle))
        self._preview.publish(msg)
        if commanding:
            self.controllers.send_hold(plan.rows[-1], to_ns(settle))
        if self.plan_views is not None:
            now = self._node.get_clock().now().nanoseconds * 1e-9
            self.plan_views.on_plan(now, [now + settle], plan.rows[-1:, : len(arm_names)])

    def tick(self, now: float, command: np.ndarray | None, commanding: bool, holding: bool) -> None:
        """Each control step: the per-step command, the controllers' step outputs, the views."""
        if self._steps is not None and command is not None and commanding:
            names = self._groups.arm_joints
            arm = command[: len(names)]
            if self._steps.msg_type is Float64MultiArray:
                self._steps.publish(conversions.float_array_msg(arm))
            else:
                self._steps.publish(ROS_MESSAGES.joint_state(to_ns(now), names, arm))
        self.controllers.tick(command, commanding, holding)
        if self.plan_views is not None:  # after the commands
            self.plan_views.publish_executed()

    def await_delivery(self) -> None:
        """Wait (briefly) until the controllers acknowledged what was sent, e.g. a last hold."""
        self.controllers.wait_for_delivery(DELIVERY_TIMEOUT)

    def replace_plan_views(self, plan_views: PlanViews | None) -> None:
        """Destroy the plan views in use and use ``plan_views`` from now on."""
        if self.plan_views is not None:
            self.plan_views.destroy()
        self.plan_views = plan_views

    def destroy(self) -> None:
        """Destroy the controllers' outputs, the publishers and the plan views."""
        self.controllers.destroy()
        for publisher in (self._preview, self._chunks, self._steps):
            if publisher is not None:
                self._node.destroy_lifecycle_publisher(publisher)
        self.replace_plan_views(None)
