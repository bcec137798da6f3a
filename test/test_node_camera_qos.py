# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A camera that does not arrive is named, with its cause, in diagnostics and one warning.

The node (its own process, tiny engine) reads its cameras reliable (camera_qos' default); the
harness publishes two cameras reliable and the wrist camera best effort, as a driver using the
sensor-data QoS does, which a reliable reader never matches.
"""

import threading

from node_support import NODE
import pytest
from rclpy.qos import qos_profile_sensor_data

from dreamzero_ros.core.observations.messages import to_ns
from dreamzero_ros.droid_clips import demo_clips
from dreamzero_ros.ros.conversions import ROS_MESSAGES

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 60.0


def test_a_best_effort_camera_is_reported_slow_with_its_cause(closed_loop):
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import Image

    clips = demo_clips(15)[0]
    loop = closed_loop('camera_qos_harness')
    harness = loop.harness
    harness.record('diagnostics', DiagnosticArray, '/diagnostics')
    node = loop.start_tiny_node(
        'dry_run:=true',
        # a low expected rate: on a loaded machine the harness may publish well below 15 Hz
        'camera_rates_hz:=[2.0]',
    )
    wrist = clips.pop('wrist_image_left')
    loop.stream_cameras(clips, joint_states=True)
    best_effort = harness.node.create_publisher(Image, 'wrist_image_left', qos_profile_sensor_data)
    stop = threading.Event()

    def publish_wrist():
        while not stop.wait(1 / 15):
            best_effort.publish(ROS_MESSAGES.image(to_ns(harness.now()), wrist[0]))

    thread = threading.Thread(target=publish_wrist, daemon=True)
    thread.start()

    def slow_report():
        for array in harness.messages('diagnostics'):
            for status in array.status:
                values = {kv.key: kv.value for kv in status.values}
                if status.name.startswith(NODE.strip('/')) and values.get(
                    'camera_rate_hz.wrist_image_left'
                ):
                    return status, values
        return None

    try:
        status, values = harness.wait_for(slow_report, TIMEOUT, 'camera rates', node.log)
        assert float(values['camera_rate_hz.wrist_image_left']) == 0.0
        assert float(values['camera_rate_hz.exterior_image_1_left']) > 0.7 * 2.0
        assert status.level == b'\x01', status
        assert "camera 'wrist_image_left' received at 0.0 Hz, expected 2 Hz" in status.message
        harness.wait_for(lambda: 'offer best_effort' in node.log(), 10, 'the warning', node.log)
        harness.wait_for(
            lambda: len(harness.messages('diagnostics')) > 8, 20, 'more diagnostics', node.log
        )
        log = node.log()
        # one warning per camera per WARNING_PERIOD (10 s), though diagnostics say it each second
        assert log.count("camera 'wrist_image_left' received at") == 1, log
        assert 'set camera_qos.reliability best_effort' in log
        assert "camera 'exterior_image_1_left' received" not in log
    finally:
        stop.set()
        thread.join(5)
