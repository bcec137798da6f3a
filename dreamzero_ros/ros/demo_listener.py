# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The demo's listener: the policy node's chunks, trajectories and diagnostics, and the arm.

With an arm (:class:`ArmTopics`), it also records the arm's joint states, its gripper commands
and its controller's diagnostics (``dreamzero-sim-arm``: trajectories accepted and rejected), and
checks that the arm reaches the trajectories' waypoints (core/motion/arm_tracking.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from diagnostic_msgs.msg import DiagnosticArray
import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from trajectory_msgs.msg import JointTrajectory

from dreamzero_ros.core.config.node_config import NODE_NAME
from dreamzero_ros.core.config.node_settings import NodeSettings
from dreamzero_ros.core.control.latency_stats import LatencyStats
from dreamzero_ros.core.motion.arm_tracking import ArmTracking, TrackingReport
from dreamzero_ros.core.observations.messages import is_hold, stamp_seconds
from dreamzero_ros.ros.conversions import ActionChunkMsg, trajectory_from_msg

_DEFAULTS = NodeSettings()


@dataclass(frozen=True)
class ReceivedChunk:
    """One chunk as the listener saw it."""

    chunk_id: int
    shape: tuple[int, int]
    stamp: float
    latency: float
    first_row: np.ndarray


@dataclass(frozen=True)
class ArmTopics:
    """Where the arm answers: its joints, gripper command, rejections and diagnostics name."""

    joints: tuple[str, ...]
    gripper_joint: str
    gripper_topic: str  # trajectory_msgs/JointTrajectory of a gripper controller
    rejected_topic: str
    diagnostics_name: str
    joint_states_topic: str = _DEFAULTS.joint_states_topic


def _fmt(row: np.ndarray) -> str:
    return '[' + ' '.join(f'{v:+.3f}' for v in row) + ']'


class DemoListener(Node):
    """Subscribes to the node's chunks (or its preview), controller trajectories, diagnostics."""

    def __init__(self, policy_node: str = NODE_NAME, arm: ArmTopics | None = None) -> None:
        super().__init__('dreamzero_demo_listener')
        self.chunks: list[ReceivedChunk] = []
        self.max_chunks: int | None = None
        self.diagnostics_received = 0
        self.motions = 0
        self.holds = 0
        self.latency = LatencyStats()
        self.diagnostics: dict[str, str] = {}
        self._status_name = f'{policy_node}: policy'
        private = f'/{policy_node}/'
        if ActionChunkMsg is not None:
            topic = _DEFAULTS.chunk_topic.replace('~/', private)
            self.create_subscription(ActionChunkMsg, topic, self._on_chunk, 10)
        else:
            topic = _DEFAULTS.preview_topic.replace('~/', private)
            self.create_subscription(JointTrajectory, topic, self._on_preview, 10)
        self.source = topic
        self.create_subscription(
            JointTrajectory, _DEFAULTS.trajectory_topic, self._on_trajectory, 10
        )
        self.create_subscription(DiagnosticArray, '/diagnostics', self._on_diagnostics, 10)
        self.arm = arm
        self.tracking = ArmTracking(arm.joints if arm else ())
        self.arm_diagnostics: dict[str, str] = {}
        self.rejections: list[str] = []
        self.gripper_commands: list[float] = []
        self.gripper_position = float('nan')
        if arm is not None:
            self.create_subscription(JointState, arm.joint_states_topic, self._on_joint_state, 10)
            self.create_subscription(String, arm.rejected_topic, self._on_rejected, 10)
            self.create_subscription(
                JointTrajectory, arm.gripper_topic, self._on_gripper_trajectory, 10
            )

    def record_next_chunks(self, count: int) -> None:
        """Forget the chunks received so far; record the next ``count`` only."""
        self.chunks.clear()
        self.latency = LatencyStats()
        self.max_chunks = count

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _record(self, chunk_id: int, rows: np.ndarray, stamp: float) -> None:
        if self.max_chunks is not None and len(self.chunks) >= self.max_chunks:
            return
        now = self._now()
        self.latency.record(now - stamp, now)
        self.chunks.append(
            ReceivedChunk(chunk_id, tuple(rows.shape), stamp, now - stamp, rows[0].copy())
        )

    def _on_chunk(self, msg) -> None:
        rows = np.asarray(msg.positions, dtype=np.float64).reshape(msg.horizon, -1)
        self._record(msg.chunk_id, rows, stamp_seconds(msg.header.stamp))

    def _on_preview(self, msg: JointTrajectory) -> None:
        if is_hold(msg):
            return  # a hold, not a chunk
        rows = np.array([point.positions for point in msg.points])
        self._record(len(self.chunks), rows, stamp_seconds(msg.header.stamp))

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        trajectory = trajectory_from_msg(msg)
        if is_hold(msg):
            self.holds += 1
        else:
            self.motions += 1
        self.tracking.commanded(trajectory, self._now())

    def _on_joint_state(self, msg: JointState) -> None:
        self.tracking.measured(stamp_seconds(msg.header.stamp), msg.name, msg.position)
        if self.arm.gripper_joint in msg.name:
            self.gripper_position = msg.position[list(msg.name).index(self.arm.gripper_joint)]

    def _on_rejected(self, msg: String) -> None:
        self.rejections.append(msg.data)
        self.get_logger().error(f'the arm rejected a trajectory: {msg.data}')

    def _on_gripper_trajectory(self, msg: JointTrajectory) -> None:
        if self.arm.gripper_joint in msg.joint_names and msg.points:
            index = list(msg.joint_names).index(self.arm.gripper_joint)
            self.gripper_commands.append(msg.points[-1].positions[index])

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values}
            if status.name == self._status_name:
                self.diagnostics = {**values, 'message': status.message}
                self.diagnostics_received += 1
            elif self.arm is not None and status.name == self.arm.diagnostics_name:
                self.arm_diagnostics = {**values, 'message': status.message}

    @property
    def accepted(self) -> int:
        """Trajectories the arm's controller accepted, as it last reported."""
        return int(self.arm_diagnostics.get('trajectories_accepted', 0))

    @property
    def rejected(self) -> int:
        """Trajectories the arm's controller rejected (its report, or the rejections seen)."""
        return max(int(self.arm_diagnostics.get('trajectories_rejected', 0)), len(self.rejections))

    def arm_line(self) -> str:
        """One line: where the arm is, how far it moved, what its controller accepted."""
        report = self.tracking.report()
        if not report.samples:
            return 'arm: no joint states yet'
        return (
            f'arm: joints {_fmt(report.latest)} rad, gripper {self.gripper_position:.4f} m; '
            f'moved up to {report.moved:.3f} rad; {self.accepted} trajectories accepted, '
            f'{self.rejected} rejected'
        )

    def summary(self, elapsed: float) -> str:
        """A few lines: chunk count and latency, the node's own counters, the arm's."""
        d = self.diagnostics
        lines = [
            f'summary: {len(self.chunks)} chunks in {elapsed:.1f} s (from {self.source}); '
            f'latency p50 {self.latency.p50:.2f} s, p95 {self.latency.p95:.2f} s '
            '(observation stamp to arrival here)',
            f'  {self.motions + self.holds} trajectories reached {_DEFAULTS.trajectory_topic} '
            f'({self.motions} motions, {self.holds} holds)',
        ]
        if d:
            lines.append(
                f'  node (since it started, before the enable too): '
                f'{d.get("chunks_applied")} chunks applied, {d.get("chunks_late")} late (too '
                f'late to apply: fewer than 2 steps still ahead on arrival), '
                f'{d.get("steps_dropped")} steps dropped (already past on arrival), inference p50 '
                f'{d.get("inference_p50_ms")} ms, {d.get("frames_received")} frames received, '
                f'{d.get("observations_refused")} observations refused; {d.get("message")}'
            )
        if self.arm is not None:
            lines.append('  ' + self._arm_summary(self.tracking.report()))
        return '\n'.join(lines)

    def _arm_summary(self, report: TrackingReport) -> str:
        gripper = (
            f'{len(self.gripper_commands)} gripper commands (last {self.gripper_commands[-1]:.4f})'
            if self.gripper_commands
            else 'no gripper command'
        )
        error = (
            f'tracking error at the waypoints max {report.max_error * 1000:.3f} mrad'
            if report.waypoints_reached
            else 'no waypoint reached yet'
        )
        rejected = f' ({self.rejections[-1]})' if self.rejections else ''
        return (
            f'arm: {self.accepted} trajectories accepted, {self.rejected} rejected{rejected}; '
            f'joints moved up to {report.moved:.3f} rad in {report.samples} joint states, '
            f'{report.waypoints_reached} waypoints reached, {error}; {gripper}'
        )
