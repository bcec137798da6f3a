# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Render the figure of docs/policy_node.md's "Seeing what the model imagines" from live topics.

Starts the policy node (a random-weight ``--preset`` checkpoint, config/cpu_small.yaml, dry run)
and the demo camera stream as their own processes, subscribes to what the Foxglove layout and
the RViz config show -- the cameras, ``~/model_input``, ``~/predicted_video`` per camera, the
preview trajectory against the joint states, and /diagnostics -- and draws one chunk of them
with matplotlib (a stand-in for a screenshot of the layout):

    python scripts/render_views_figure.py --out docs/images/policy_views.png

The weights are random, so the predicted frames show what the pipeline publishes, not what a
trained model predicts.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

REPO = Path(__file__).resolve().parents[1]
NODE = '/dreamzero_policy'


class Collector:
    """Subscribes to the view, camera, plan and diagnostics topics and keeps what arrives."""

    def __init__(self, cameras: list[str]) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import CompressedImage, Image, JointState
        from trajectory_msgs.msg import JointTrajectory

        from dreamzero_ros.ros.imagination_views import VIEW_QOS

        rclpy.init()
        self.node = rclpy.create_node('dreamzero_views_figure')
        self.lock = threading.Lock()
        self.messages: dict[str, list] = {}
        self.arrivals: dict[int, int] = {}  # id(message) -> arrival order
        subscribe = self.node.create_subscription
        for camera in cameras:
            subscribe(Image, f'/{camera}', self._keep(f'camera/{camera}'), qos_profile_sensor_data)
            topic = f'{NODE}/predicted_video/{camera}/compressed'
            subscribe(CompressedImage, topic, self._keep(f'predicted/{camera}'), VIEW_QOS)
        subscribe(CompressedImage, f'{NODE}/model_input/compressed', self._keep('input'), VIEW_QOS)
        subscribe(JointTrajectory, f'{NODE}/preview_trajectory', self._keep('preview'), 10)
        subscribe(JointState, '/joint_states', self._keep('joints'), qos_profile_sensor_data)
        subscribe(DiagnosticArray, '/diagnostics', self._keep('diagnostics'), 10)
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        threading.Thread(target=self.executor.spin, daemon=True).start()

    def _keep(self, key: str):
        def keep(msg) -> None:
            with self.lock:
                self.arrivals[id(msg)] = len(self.arrivals)
                self.messages.setdefault(key, []).append(msg)

        return keep

    def get(self, key: str) -> list:
        """Messages of ``key`` so far."""
        with self.lock:
            return list(self.messages.get(key, []))

    def chunk_frames(self, camera: str, model_input) -> list:
        """The predicted frames of ``camera`` of the chunk whose model input is given.

        The node publishes a chunk's model input, then its predicted frames: the first 8 of
        ``camera`` to arrive after the input.
        """
        after = self.arrivals[id(model_input)]
        with self.lock:
            frames = [m for m in self.messages.get(f'predicted/{camera}', [])
                      if self.arrivals[id(m)] > after]  # fmt: skip
        return frames[:8]


def _seconds(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def wait_for_chunk(collector: Collector, cameras: list[str], timeout: float):
    """The model input message of a chunk whose predicted frames of every camera arrived."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for msg in collector.get('input'):
            if min(len(collector.chunk_frames(c, msg)) for c in cameras) >= 8:
                return msg
        time.sleep(0.2)
    raise TimeoutError('no chunk with its views arrived')


def render(collector: Collector, cameras: list[str], model_input, out: Path) -> None:
    """Draw the topics of the chunk of ``model_input`` into ``out`` (PNG)."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    from dreamzero_ros.core.observations.image_codec import decode_compressed, msg_to_rgb

    stamp = _seconds(model_input.header.stamp)
    figure = plt.figure(figsize=(16, 11))
    grid = figure.add_gridspec(6, 8)
    for index, camera in enumerate(cameras):
        frames = collector.get(f'camera/{camera}')
        latest = min(frames, key=lambda m: abs(_seconds(m.header.stamp) - stamp))
        axis = figure.add_subplot(grid[0:2, index * 2 : index * 2 + 2])
        axis.imshow(msg_to_rgb(latest))
        axis.set_title(f'/{camera}', fontsize=9)
        axis.axis('off')
    axis = figure.add_subplot(grid[0:2, 6:8])
    axis.imshow(decode_compressed('jpeg', model_input.data))
    axis.set_title(f'{NODE}/model_input', fontsize=9)
    axis.axis('off')
    for row, camera in enumerate(cameras):
        for column, msg in enumerate(collector.chunk_frames(camera, model_input)):
            axis = figure.add_subplot(grid[2 + row, column])
            axis.imshow(decode_compressed('jpeg', msg.data))
            axis.set_xticks([])
            axis.set_yticks([])
            axis.set_xlabel(f'+{_seconds(msg.header.stamp) - stamp:.1f} s', fontsize=7)
            if column == 0:
                axis.set_ylabel(f'predicted\n{camera}', fontsize=7)
    axis = figure.add_subplot(grid[5, 0:5])
    preview = next((m for m in collector.get('preview') if _seconds(m.header.stamp) == stamp), None)
    joints = collector.get('joints')
    if preview is not None:
        times = [_seconds(p.time_from_start) for p in preview.points]
        positions = np.array([p.positions for p in preview.points])
        for joint in range(min(3, positions.shape[1])):
            axis.plot(times, positions[:, joint], label=f'plan joint {joint + 1}')
    if joints:
        measured = np.array([m.position[:3] for m in joints])
        measured_t = np.array([_seconds(m.header.stamp) - stamp for m in joints])
        for joint in range(measured.shape[1]):
            axis.plot(measured_t, measured[:, joint], '--', label=f'measured joint {joint + 1}')
    axis.set_xlabel('seconds after the observation')
    axis.set_ylabel('rad')
    axis.legend(fontsize=6, ncol=2)
    axis.set_title('plan (preview trajectory) vs executed (joint states)', fontsize=9)
    axis = figure.add_subplot(grid[5, 5:8])
    axis.axis('off')
    values = {}
    for msg in collector.get('diagnostics'):
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values} or values
    keys = [k for k in values if k.startswith('views_')] + ['engine_state', 'chunks_applied']
    axis.text(0, 1, '/diagnostics\n' + '\n'.join(f'{k}: {values.get(k)}' for k in keys),
              va='top', family='monospace', fontsize=8)  # fmt: skip
    figure.suptitle('What the policy node publishes for one chunk (random-weight model)')
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=70)


def main() -> int:
    """Start the node and the demo stream, collect one chunk, render it."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--out', type=Path, default=REPO / 'docs' / 'images' / 'policy_views.png')
    parser.add_argument('--preset', default='tiny', choices=('tiny', 'small'))
    parser.add_argument('--timeout', type=float, default=300.0)
    args = parser.parse_args()
    from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint
    from dreamzero_ros.engine.checkpoint.synthetic_droid import droid_embodiment

    cameras = list(droid_embodiment().camera_keys)
    env = {**os.environ, 'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST'}
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = write_random_checkpoint(Path(folder) / 'ckpt', preset=args.preset)
        node = subprocess.Popen(
            [sys.executable, '-m', 'dreamzero_ros.ros.policy_node_main', '--ros-args',
             '--params-file', str(REPO / 'config' / 'cpu_small.yaml'),
             '-p', f'engine.checkpoint:={checkpoint}', '-p', 'dry_run:=true'],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        stream = subprocess.Popen(
            [sys.executable, '-m', 'dreamzero_ros.ros.demo_stream'],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            collector = Collector(cameras)
            model_input = wait_for_chunk(collector, cameras, args.timeout)
            time.sleep(1.5)  # a few joint states after the chunk, and a diagnostics message
            render(collector, cameras, model_input, args.out)
        finally:
            for process in (stream, node):
                process.send_signal(2)
                process.wait(30)
    print(f'wrote {args.out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
