# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Reads /tf_static, /tf and joint_states as a tf listener would, run as its own process.

``python tf_listener_peer.py SECONDS``: subscribes with tf2's QoS (``/tf_static`` transient
local), waits until a ``/tf`` message and a joint state of the same stamp have arrived (at most
SECONDS), and prints one JSON object: ``static`` and ``dynamic`` (child frame -> [parent frame,
xyz, quaternion xyzw]), ``joints`` (name -> position) and ``stamp``. Needs tf2_msgs.
"""

import json
import sys
import time

import rclpy
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from tf2_msgs.msg import TFMessage


def _entries(msg: TFMessage) -> dict:
    out = {}
    for transform in msg.transforms:
        t, r = transform.transform.translation, transform.transform.rotation
        out[transform.child_frame_id] = [
            transform.header.frame_id,
            [t.x, t.y, t.z],
            [r.x, r.y, r.z, r.w],
        ]
    return out


def _stamp(header) -> int:
    return header.stamp.sec * 10**9 + header.stamp.nanosec


def main() -> None:
    seconds = float(sys.argv[1])
    rclpy.init()
    node = rclpy.create_node('tf_listener_peer')
    static: dict = {}
    dynamic: dict[int, dict] = {}
    joints: dict[int, dict] = {}
    latched = QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
    )
    node.create_subscription(TFMessage, '/tf_static', lambda m: static.update(_entries(m)), latched)
    node.create_subscription(
        TFMessage,
        '/tf',
        lambda m: m.transforms and dynamic.update({_stamp(m.transforms[0].header): _entries(m)}),
        QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE),
    )
    node.create_subscription(
        JointState,
        'joint_states',
        lambda m: joints.update({_stamp(m.header): dict(zip(m.name, m.position, strict=True))}),
        10,
    )
    end = time.monotonic() + seconds
    found = None
    while time.monotonic() < end and found is None:
        rclpy.spin_once(node, timeout_sec=0.1)
        common = sorted(set(dynamic) & set(joints))
        if static and common:
            found = common[-1]
    out = {'static': static, 'dynamic': {}, 'joints': {}, 'stamp': found}
    if found is not None:
        out['dynamic'], out['joints'] = dynamic[found], joints[found]
    print(json.dumps(out), flush=True)
    node.destroy_node()
    rclpy.try_shutdown()


if __name__ == '__main__':
    main()
