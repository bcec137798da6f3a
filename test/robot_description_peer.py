# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Publishes a URDF as robot_state_publisher does: once, std_msgs/String, transient local.

``python robot_description_peer.py URDF_FILE [TOPIC]``: prints ``published`` and spins until
interrupted, so that late subscribers still get the description.
"""

import sys

import rclpy
from std_msgs.msg import String

from dreamzero_ros.ros.robot_description import DESCRIPTION_QOS
from dreamzero_ros.ros.spin import spin_until_shutdown

if __name__ == '__main__':
    path = sys.argv[1]
    topic = sys.argv[2] if len(sys.argv) > 2 else 'robot_description'
    rclpy.init()
    node = rclpy.create_node('robot_state_publisher')
    publisher = node.create_publisher(String, topic, DESCRIPTION_QOS)
    with open(path) as urdf:
        publisher.publish(String(data=urdf.read()))
    print('published', flush=True)
    spin_until_shutdown(node)
