# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Publish joint states as fast as a Franka's joint_state_broadcaster (1 kHz), until SIGINT.

A separate process for ``node_pipeline.py``'s flood run: the demo robot's joint trajectory,
stamped with the publication time, on ``joint_states``; prints the rate reached when stopped.

    python benchmarks/joint_state_flood.py --rate 1000
"""

import argparse
import signal
import sys
import time

import numpy as np
import rclpy
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState

from dreamzero_ros.core.config.node_settings import NodeSettings
from dreamzero_ros.droid_clips import demo_joint_trajectory
from dreamzero_ros.ros.conversions import to_time


def main() -> int:
    """Publish until SIGINT; print the rate reached."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--rate', type=float, default=1000.0, help='messages per second')
    options = parser.parse_args()
    stop = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(True))
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    rclpy.init()
    node = rclpy.create_node('joint_state_flood')
    publisher = node.create_publisher(JointState, 'joint_states', qos_profile_sensor_data)
    defaults = NodeSettings()
    names = [*defaults.arm_joint_names, defaults.gripper_joint_name]
    start = time.monotonic()
    sent = 0
    while not stop:
        now = node.get_clock().now().nanoseconds * 1e-9
        joints, gripper = demo_joint_trajectory(np.array([time.monotonic() - start]))
        msg = JointState(name=names, position=[*joints[0], *gripper[0]])
        msg.header.stamp = to_time(now)
        publisher.publish(msg)
        sent += 1
        delay = start + sent / options.rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    seconds = time.monotonic() - start
    print(f'published {sent} joint states in {seconds:.1f} s: {sent / seconds:.0f} Hz', flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
