# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Core values <-> ROS messages: one builder for rclpy and rosbags, on the real classes."""

import numpy as np
import pytest
from rclpy.serialization import deserialize_message

from dreamzero_ros.core.control.status_report import StatusReport
from dreamzero_ros.core.observations.image_codec import msg_to_rgb
from dreamzero_ros.core.observations.messages import stamp_seconds, to_ns, trajectory_samples
from dreamzero_ros.replay.typestore import BAG_MESSAGES, replay_typestore
from dreamzero_ros.ros import conversions
from dreamzero_ros.ros.conversions import ROS_MESSAGES

NAMES = [f'j{i}' for i in range(8)]
ROWS = np.arange(24, dtype=float).reshape(3, 8) / 10.0
RGB = np.random.default_rng(0).integers(0, 256, (6, 10, 3), dtype=np.uint8)

#: (ROS type, builder call) of every message both the node and replay build.
SHARED = {
    'time': ('builtin_interfaces/msg/Time', lambda b: b.time(to_ns(1796227007.457123))),
    'joint_state': (
        'sensor_msgs/msg/JointState',
        lambda b: b.joint_state(to_ns(3.0), NAMES, ROWS[0], ROWS[1]),
    ),
    'trajectory': (
        'trajectory_msgs/msg/JointTrajectory',
        lambda b: b.trajectory(to_ns(100.0), NAMES, [4 * 10**8, 6 * 10**8, 8 * 10**8], ROWS),
    ),
    'hold': ('trajectory_msgs/msg/JointTrajectory', lambda b: b.hold(NAMES, ROWS[2], 10**8)),
    'image': ('sensor_msgs/msg/Image', lambda b: b.image(to_ns(4.0), RGB, 'cam', 'bgr8')),
    'compressed_image': (
        'sensor_msgs/msg/CompressedImage',
        lambda b: b.compressed_image(to_ns(4.0), RGB, 'cam', 'png'),
    ),
    'action_chunk': (  # latency 0.75: exact in the float32 field
        'dreamzero_ros/msg/ActionChunk',
        lambda b: b.action_chunk(to_ns(5.0), NAMES, ROWS, to_ns(0.25), 3, 0.75, 's'),
    ),
}


@pytest.mark.parametrize('kind', sorted(SHARED))
def test_node_and_replay_build_the_same_message(kind):
    """What replay writes into a bag reads back, in rclpy, as the message the node publishes."""
    type_name, build = SHARED[kind]
    if kind == 'action_chunk' and conversions.ActionChunkMsg is None:
        pytest.skip('the package messages are not built (scripts/build_interfaces.sh)')
    written = bytes(replay_typestore().serialize_cdr(build(BAG_MESSAGES), type_name))
    published = build(ROS_MESSAGES)
    assert deserialize_message(written, type(published)) == published


@pytest.mark.parametrize('seconds', [0.0, 1.5, 1796227007.457123, 12.999999999])
def test_time_round_trip(seconds):
    stamp = conversions.to_time(seconds)
    assert 0 <= stamp.nanosec < 1_000_000_000
    assert stamp_seconds(stamp) == pytest.approx(seconds, abs=1e-6)


def test_trajectory_points_are_timed_from_the_stamp():
    msg = SHARED['trajectory'][1](ROS_MESSAGES)
    assert stamp_seconds(msg.header.stamp) == 100.0 and list(msg.joint_names) == NAMES
    offsets = [stamp_seconds(p.time_from_start) for p in msg.points]
    np.testing.assert_allclose(offsets, [0.4, 0.6, 0.8], atol=1e-9)
    np.testing.assert_array_equal([p.positions for p in msg.points], ROWS)
    assert all(len(p.velocities) == 0 for p in msg.points)
    times, positions = trajectory_samples(msg, receive_ns=0)
    np.testing.assert_array_equal(times, to_ns(100.0) + np.array([4, 6, 8]) * 10**8)
    np.testing.assert_array_equal(positions, ROWS)


def test_trajectory_points_carry_velocities_when_given():
    rows, velocities = np.ones((2, 7)), np.stack([np.full(7, 0.5), np.zeros(7)])
    msg = ROS_MESSAGES.trajectory(to_ns(100.0), NAMES[:7], [0, 10**8], rows, velocities)
    np.testing.assert_array_equal([p.velocities for p in msg.points], velocities)


def test_hold_starts_on_receipt_with_zero_velocity():
    msg = SHARED['hold'][1](ROS_MESSAGES)
    assert msg.header.stamp.sec == 0 and msg.header.stamp.nanosec == 0
    (point,) = msg.points
    assert list(point.velocities) == [0.0] * 8 and list(point.positions) == list(ROWS[2])
    assert stamp_seconds(point.time_from_start) == pytest.approx(0.1)
    times, _ = trajectory_samples(msg, receive_ns=7 * 10**9)
    assert times.tolist() == [7 * 10**9 + 10**8]  # a zero stamp starts on receipt


def test_step_commands():
    row = np.linspace(0, 1, 8)
    assert list(conversions.float_array_msg(row).data) == pytest.approx(list(row))
    state = SHARED['joint_state'][1](ROS_MESSAGES)
    assert list(state.name) == NAMES and stamp_seconds(state.header.stamp) == 3.0
    assert list(state.velocity) == list(ROWS[1]) and len(state.effort) == 0


def test_action_chunk_message_is_row_major():
    if conversions.ActionChunkMsg is None:
        pytest.skip('the package messages are not built (scripts/build_interfaces.sh)')
    msg = SHARED['action_chunk'][1](ROS_MESSAGES)
    assert msg.horizon == 3 and msg.chunk_id == 3 and msg.session_id == 's'
    np.testing.assert_array_equal(np.reshape(msg.positions, (msg.horizon, -1)), ROWS)
    assert stamp_seconds(msg.step_duration) == 0.25
    assert msg.inference_latency == pytest.approx(0.75)


def test_diagnostics_level_and_values():
    report = StatusReport(1, 'input refused', (('a', '1'), ('b', 'x')))
    msg = conversions.diagnostics_msg(2.0, 'dreamzero_policy: policy', report)
    (status,) = msg.status
    assert status.level == status.WARN and status.message == 'input refused'
    assert [(kv.key, kv.value) for kv in status.values] == [('a', '1'), ('b', 'x')]


@pytest.mark.parametrize('encoding', ['rgb8', 'bgr8'])
def test_image_message_decodes_back(encoding):
    msg = ROS_MESSAGES.image(to_ns(4.0), RGB, 'cam', encoding)
    assert msg.header.frame_id == 'cam' and msg.encoding == encoding
    np.testing.assert_array_equal(msg_to_rgb(msg), RGB)


def test_node_image_decoding_uses_the_codec_and_refuses_the_rest():
    from sensor_msgs.msg import Image

    from dreamzero_ros.errors import ImageDecodeError
    from dreamzero_ros.ros import image_decoding

    rgb = np.full((2, 3, 3), 7, dtype=np.uint8)
    np.testing.assert_array_equal(image_decoding.decode_image(ROS_MESSAGES.image(0, rgb)), rgb)
    odd = Image(encoding='yuv422', height=2, width=2, step=4, data=bytes(8))
    if image_decoding.CvBridge is None:
        with pytest.raises(ImageDecodeError, match='yuv422'):
            image_decoding.decode_image(odd)
    else:  # a ROS install: cv_bridge converts what the codec does not
        assert image_decoding.decode_image(odd).shape == (2, 2, 3)


def test_policy_status_message_from_a_report():
    if conversions.PolicyStatusMsg is None:
        pytest.skip('the package messages are not built (scripts/build_interfaces.sh)')
    values = {
        'lifecycle_state': 'active', 'engine_state': 'ready', 'enabled': 'true',
        'dry_run': 'false', 'prompt': 'p', 'session_id': 's', 'chunks_applied': '4',
        'frames_dropped': '1', 'observations_refused': '2', 'latency_p50_ms': '250.0',
        'latency_p95_ms': 'nan',
    }  # fmt: skip
    msg = conversions.policy_status_msg(1.0, StatusReport(0, 'ok', tuple(values.items())))
    assert msg.state == msg.STATE_ACTIVE and msg.enabled and not msg.dry_run
    assert (msg.chunks_published, msg.frames_dropped, msg.observations_refused) == (4, 1, 2)
    assert msg.latency_p50 == pytest.approx(0.25) and np.isnan(msg.latency_p95)
    values['engine_state'] = 'error: boom'
    msg = conversions.policy_status_msg(1.0, StatusReport(2, 'x', tuple(values.items())))
    assert msg.state == msg.STATE_ERROR


def test_holds_and_chunk_trajectories_are_told_apart():
    from dreamzero_ros.core.observations.messages import is_hold

    rows = np.zeros((3, 7))
    # a chunk: stamped at its observation, first point at its arrival 0.3 s later
    offsets = [3 * 10**8, 4 * 10**8, 5 * 10**8]
    chunk = ROS_MESSAGES.trajectory(to_ns(100.0), NAMES[:7], offsets, rows)
    # a braking hold: stamped when made, its first point there
    braking = ROS_MESSAGES.trajectory(to_ns(100.0), NAMES[:7], [0, 10**8, 2 * 10**8], rows)
    at_rest = ROS_MESSAGES.hold(NAMES[:7], rows[0], 10**8)
    assert not is_hold(chunk) and is_hold(braking) and is_hold(at_rest)


def test_nanoseconds_are_exact_for_the_seconds_given():
    seconds = 1_700_000_000.123456789  # as a float: ...123456717 ns, rounded
    assert to_ns(seconds) == 1_700_000_000_123_456_717
    assert abs(round(seconds * 1e9) - to_ns(seconds)) > 10  # the product is not
    assert to_ns(-1.5) == -1_500_000_000 and to_ns(2.5e-9) == 2
