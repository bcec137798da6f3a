# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The demo's listener: records the policy node's chunks, trajectories and diagnostics."""

from __future__ import annotations

from dataclasses import dataclass

from diagnostic_msgs.msg import DiagnosticArray
import numpy as np
from rclpy.node import Node
from trajectory_msgs.msg import JointTrajectory

from dreamzero_ros.core.latency_stats import LatencyStats
from dreamzero_ros.core.node_config import NODE_NAME, NodeSettings
from dreamzero_ros.ros.conversions import ActionChunkMsg

_DEFAULTS = NodeSettings()


@dataclass(frozen=True)
class ReceivedChunk:
    """One chunk as the listener saw it."""

    chunk_id: int
    shape: tuple[int, int]
    stamp: float
    latency: float
    first_row: np.ndarray


def _seconds(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


class DemoListener(Node):
    """Subscribes to the node's chunks (or its preview), controller trajectories, diagnostics."""

    def __init__(self, policy_node: str = NODE_NAME) -> None:
        super().__init__('dreamzero_demo_listener')
        self.chunks: list[ReceivedChunk] = []
        self.max_chunks: int | None = None
        self.diagnostics_received = 0
        self.trajectories = 0
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
        self._record(msg.chunk_id, rows, _seconds(msg.header.stamp))

    def _on_preview(self, msg: JointTrajectory) -> None:
        if msg.header.stamp.sec == 0 and msg.header.stamp.nanosec == 0:
            return  # a hold, not a chunk
        rows = np.array([point.positions for point in msg.points])
        self._record(len(self.chunks), rows, _seconds(msg.header.stamp))

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        self.trajectories += 1

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name == self._status_name:
                self.diagnostics = {kv.key: kv.value for kv in status.values}
                self.diagnostics['message'] = status.message
                self.diagnostics_received += 1

    def summary(self, elapsed: float) -> str:
        """A few lines: chunk count and latency, and the node's own counters."""
        d = self.diagnostics
        lines = [
            f'summary: {len(self.chunks)} chunks in {elapsed:.1f} s (from {self.source}); '
            f'latency p50 {self.latency.p50:.2f} s, p95 {self.latency.p95:.2f} s '
            '(observation stamp to arrival here)',
            f'  {self.trajectories} trajectories reached {_DEFAULTS.trajectory_topic}',
        ]
        if d:
            lines.append(
                f'  node: {d.get("chunks_applied")} chunks applied, {d.get("chunks_late")} late, '
                f'{d.get("steps_dropped")} past steps dropped, inference p50 '
                f'{d.get("inference_p50_ms")} ms, {d.get("frames_received")} frames received, '
                f'{d.get("observations_refused")} observations refused; {d.get("message")}'
            )
        return '\n'.join(lines)
