# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A stand-in for the policy node in live-replay tests, run as its own process.

Runs with use_sim_time; counts what the player publishes, checks /clock against the stamps, and
answers every 10th joint state with a preview trajectory (and an ActionChunk where built)
stamped with that joint state's stamp. Prints a JSON summary when the clock stops for 2 s.
"""

import json
import sys
import time

import rclpy
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import qos_profile_sensor_data
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Image, JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

try:
    from dreamzero_ros.msg import ActionChunk
except ImportError:
    ActionChunk = None


class Peer(Node):
    def __init__(self):
        super().__init__('dreamzero_policy', parameter_overrides=[
            Parameter('use_sim_time', Parameter.Type.BOOL, True)
        ])  # fmt: skip
        self.counts = {'images': 0, 'joint_states': 0, 'clock': 0, 'answers': 0}
        self.clock_lag = []  # node clock - joint state stamp, seconds
        self.last_clock = time.monotonic()
        for camera in ('wrist_image_left', 'exterior_image_1_left', 'exterior_image_2_left'):
            self.create_subscription(Image, camera, self.on_image, qos_profile_sensor_data)
        self.create_subscription(
            JointState, 'joint_states', self.on_joints, qos_profile_sensor_data
        )
        self.create_subscription(Clock, '/clock', self.on_clock, 10)
        self.preview = self.create_publisher(JointTrajectory, '~/preview_trajectory', 10)
        self.chunks = (
            self.create_publisher(ActionChunk, '~/action_chunk', 10) if ActionChunk else None
        )

    def on_image(self, msg):
        self.counts['images'] += 1

    def on_clock(self, msg):
        self.counts['clock'] += 1
        self.last_clock = time.monotonic()

    def on_joints(self, msg):
        self.counts['joint_states'] += 1
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        self.clock_lag.append(self.get_clock().now().nanoseconds * 1e-9 - stamp)
        if self.counts['joint_states'] % 10:
            return
        trajectory = JointTrajectory()
        trajectory.header.stamp = msg.header.stamp
        trajectory.joint_names = list(msg.name)
        for k in range(3):
            point = JointTrajectoryPoint()
            point.positions = [p + 0.1 * k for p in msg.position]
            point.time_from_start.nanosec = k * 66_666_667
            trajectory.points.append(point)
        self.preview.publish(trajectory)
        if self.chunks is not None:
            chunk = ActionChunk()
            chunk.header.stamp = msg.header.stamp
            chunk.step_duration.nanosec = 66_666_667
            chunk.joint_names = list(msg.name)
            chunk.positions = [p + 0.1 * k for k in range(3) for p in msg.position]
            chunk.horizon = 3
            chunk.chunk_id = self.counts['answers']
            chunk.session_id = 'peer'
            self.chunks.publish(chunk)
        self.counts['answers'] += 1


def main():
    rclpy.init()
    node = Peer()
    print('ready', flush=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)
        if node.counts['clock'] and time.monotonic() - node.last_clock > 2.0:
            break
    lag = sorted(node.clock_lag)
    print(json.dumps({
        **node.counts,
        'chunks_built': ActionChunk is not None,
        'clock_lag_min': lag[0] if lag else None,
        'clock_lag_max': lag[-1] if lag else None,
    }), flush=True)  # fmt: skip
    node.destroy_node()
    rclpy.shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
