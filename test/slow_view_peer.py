# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A slow reader of the policy node's view topics, run as its own process.

``python slow_view_peer.py NODE CAMERA... ``: subscribes (reliable) to ``NODE/model_input``,
``NODE/predicted_video`` and ``NODE/predicted_video/<camera>`` (each ``/compressed``) and
sleeps 5 s in every callback, so that it reads far slower than the node writes. Prints
``ready`` once spinning.
"""

import sys
import time

import rclpy
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CompressedImage


def main() -> None:
    node_name, cameras = sys.argv[1], sys.argv[2:]
    rclpy.init()
    node = Node('slow_view_reader')
    qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
    topics = [f'{node_name}/model_input', f'{node_name}/predicted_video']
    topics += [f'{node_name}/predicted_video/{camera}' for camera in cameras]
    topics = [f'{topic}/compressed' for topic in topics]
    for topic in topics:
        node.create_subscription(CompressedImage, topic, lambda msg: time.sleep(5.0), qos)
    print('ready', flush=True)
    try:
        rclpy.spin(node)
    except KeyboardInterrupt:
        pass
    finally:
        rclpy.try_shutdown()


if __name__ == '__main__':
    main()
