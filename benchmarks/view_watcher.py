# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Watch the policy node's view topics as an image panel does, until SIGINT.

A separate process for ``node_pipeline.py``'s viewer runs: subscribes (reliable, as Foxglove
and RViz do) to ``~/model_input``, ``~/predicted_video`` and each camera's
``~/predicted_video/<camera>`` of the node (JPEG, ``/compressed``), and prints the frames
received when stopped.

    python benchmarks/view_watcher.py --node /dreamzero_policy
"""

import argparse
import signal

import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CompressedImage

from dreamzero_ros.core.observations.imagination import view_topics
from dreamzero_ros.policy_types import DROID_CAMERAS


def main() -> int:
    """Subscribe until SIGINT; print the frames received."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--node', default='/dreamzero_policy', help="the policy node's name")
    options = parser.parse_args()
    stop = []
    rclpy.init()  # then this process's own handlers: rclpy's would end spin_once with an error
    signal.signal(signal.SIGINT, lambda *_: stop.append(True))
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    node = rclpy.create_node('view_watcher')
    received = [0]
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    for topic in view_topics(DROID_CAMERAS, 'jpeg').values():
        name = options.node + topic.removeprefix('~')
        node.create_subscription(
            CompressedImage, name, lambda msg: received.__setitem__(0, received[0] + 1), qos
        )
    print('watching', flush=True)
    while not stop:
        rclpy.spin_once(node, timeout_sec=0.1)
    print(f'{received[0]} frames', flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
