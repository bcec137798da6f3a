# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A /tf and /tf_static listener in its own process, for test_sim_robot_peers.py.

tf2_msgs is built for the test, and its import path reaches a process from its start. Prints
one JSON line: child -> [parent, x, y, z, qw, qx, qy, qz, stamp] of the newest transform of each
frame, and which were static.

    python sim_tf_listener_peer.py SECONDS
"""

import json
import sys
import time

import rclpy
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from tf2_msgs.msg import TFMessage


def main() -> None:
    seconds = float(sys.argv[1])
    rclpy.init()
    node = rclpy.create_node('sim_tf_listener_peer')
    frames, static = {}, set()

    def keep(message: TFMessage, latched: bool) -> None:
        for item in message.transforms:
            t, r = item.transform.translation, item.transform.rotation
            stamp = item.header.stamp.sec + item.header.stamp.nanosec * 1e-9
            frames[item.child_frame_id] = [item.header.frame_id, t.x, t.y, t.z, r.w, r.x, r.y,
                                           r.z, stamp]  # fmt: skip
            if latched:
                static.add(item.child_frame_id)

    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)  # fmt: skip
    node.create_subscription(TFMessage, '/tf', lambda m: keep(m, False), 100)
    node.create_subscription(TFMessage, '/tf_static', lambda m: keep(m, True), latched)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.1)
    print(json.dumps({'frames': frames, 'static': sorted(static)}), flush=True)
    node.destroy_node()
    rclpy.try_shutdown()


if __name__ == '__main__':
    main()
