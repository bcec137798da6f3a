# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The node's polled sensor subscriptions, over DDS with a publisher in another process.

The executor spins the subscribing node all along and must never run the subscription's
callback; the middleware keeps only the newest ``depth`` messages until the node takes them.
"""

import subprocess
import sys
import time

from node_support import ros_env
import pytest

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

PUBLISHER = """
import sys, time
import rclpy
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState

rclpy.init()
node = rclpy.create_node('polled_inputs_publisher')
publisher = node.create_publisher(JointState, 'polled_inputs_test', qos_profile_sensor_data)
end = time.monotonic() + 20
while publisher.get_subscription_count() == 0 and time.monotonic() < end:
    time.sleep(0.05)
time.sleep(0.5)
for index in range(int(sys.argv[1])):
    publisher.publish(JointState(name=['joint'], position=[float(index)]))
    time.sleep(0.001)
time.sleep(0.5)
rclpy.shutdown()
"""


def test_polled_subscription_keeps_the_newest_messages_and_never_wakes_the_executor():
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState

    from dreamzero_ros.ros.polled_inputs import PolledSubscription

    env = ros_env()
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node('polled_inputs_reader', context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        polled = PolledSubscription(node, JointState, 'polled_inputs_test', depth=10)
        publisher = subprocess.Popen([sys.executable, '-c', PUBLISHER, '300'], env=env)
        end = time.monotonic() + 60
        while publisher.poll() is None and time.monotonic() < end:
            executor.spin_once(timeout_sec=0.05)  # raises if the callback ever ran
        assert publisher.wait(5) == 0
        taken = [msg.position[0] for msg in polled.take()]
        assert 1 <= len(taken) <= 10 and taken == sorted(taken)
        assert taken[-1] >= 290  # the newest messages, the older ones were never queued
        assert polled.take() == []
        polled.destroy()
        assert node.get_subscriptions_info_by_topic('/polled_inputs_test') == []
    finally:
        executor.shutdown()
        node.destroy_node()
        context.try_shutdown()
