# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Core values -> ROS messages, on the real generated message classes."""

import numpy as np
import pytest

from dreamzero_ros.core.image_codec import msg_to_rgb
from dreamzero_ros.core.observation_cache import stamp_seconds
from dreamzero_ros.core.status_report import StatusReport
from dreamzero_ros.ros import conversions

NAMES = [f'j{i}' for i in range(8)]


@pytest.mark.parametrize('seconds', [0.0, 1.5, 1796227007.457123, 12.999999999])
def test_time_round_trip(seconds):
    stamp = conversions.to_time(seconds)
    assert 0 <= stamp.nanosec < 1_000_000_000
    assert stamp_seconds(stamp) == pytest.approx(seconds, abs=1e-6)


def test_negative_durations_clamp_to_zero():
    assert conversions.duration_seconds(conversions.to_duration(-0.5)) == 0.0


def test_trajectory_points_are_timed_from_the_stamp():
    times = 100.0 + np.array([0.4, 0.6, 0.8])
    rows = np.arange(24, dtype=float).reshape(3, 8)
    msg = conversions.trajectory_msg(100.0, times, rows, NAMES)
    assert stamp_seconds(msg.header.stamp) == 100.0 and msg.joint_names == NAMES
    offsets = [conversions.duration_seconds(p.time_from_start) for p in msg.points]
    np.testing.assert_allclose(offsets, [0.4, 0.6, 0.8], atol=1e-9)
    np.testing.assert_array_equal([p.positions for p in msg.points], rows)
    assert all(len(p.velocities) == 0 for p in msg.points)


def test_trajectory_points_carry_velocities_when_given():
    times = 100.0 + np.array([0.4, 0.6])
    rows, velocities = np.ones((2, 7)), np.stack([np.full(7, 0.5), np.zeros(7)])
    msg = conversions.trajectory_msg(100.0, times, rows, NAMES[:7], velocities)
    np.testing.assert_array_equal([p.velocities for p in msg.points], velocities)


def test_hold_starts_on_receipt_with_zero_velocity():
    msg = conversions.hold_msg(np.ones(8), NAMES, settle=0.1)
    assert msg.header.stamp.sec == 0 and msg.header.stamp.nanosec == 0
    (point,) = msg.points
    assert list(point.velocities) == [0.0] * 8
    assert conversions.duration_seconds(point.time_from_start) == pytest.approx(0.1)


def test_step_commands():
    row = np.linspace(0, 1, 8)
    assert list(conversions.float_array_msg(row).data) == pytest.approx(list(row))
    state = conversions.joint_state_msg(3.0, NAMES, row)
    assert state.name == NAMES and stamp_seconds(state.header.stamp) == 3.0


def test_action_chunk_message_is_row_major():
    if conversions.ActionChunkMsg is None:
        pytest.skip('dreamzero_ros_interfaces not built (scripts/build_interfaces.sh)')
    rows = np.arange(48, dtype=float).reshape(6, 8)
    msg = conversions.action_chunk_msg(5.0, 0.25, NAMES, rows, 3, 0.7, 's')
    assert msg.horizon == 6 and msg.chunk_id == 3 and msg.session_id == 's'
    np.testing.assert_array_equal(np.reshape(msg.positions, (msg.horizon, -1)), rows)
    assert conversions.duration_seconds(msg.step_duration) == 0.25
    assert msg.inference_latency == pytest.approx(0.7)


def test_diagnostics_level_and_values():
    report = StatusReport(1, 'input refused', (('a', '1'), ('b', 'x')))
    msg = conversions.diagnostics_msg(2.0, 'dreamzero_policy: policy', report)
    (status,) = msg.status
    assert status.level == status.WARN and status.message == 'input refused'
    assert [(kv.key, kv.value) for kv in status.values] == [('a', '1'), ('b', 'x')]


@pytest.mark.parametrize('encoding', ['rgb8', 'bgr8'])
def test_image_message_decodes_back(encoding):
    rgb = np.random.default_rng(0).integers(0, 256, (6, 10, 3), dtype=np.uint8)
    msg = conversions.image_msg(rgb, 4.0, 'cam', encoding)
    assert msg.header.frame_id == 'cam' and msg.encoding == encoding
    np.testing.assert_array_equal(msg_to_rgb(msg), rgb)


def test_node_image_decoding_uses_the_codec_and_refuses_the_rest():
    from sensor_msgs.msg import Image

    from dreamzero_ros.errors import ImageDecodeError
    from dreamzero_ros.ros import image_decoding

    rgb = np.full((2, 3, 3), 7, dtype=np.uint8)
    np.testing.assert_array_equal(
        image_decoding.decode_image(conversions.image_msg(rgb, 0, 'c')), rgb
    )
    odd = Image(encoding='yuv422', height=2, width=2, step=4, data=bytes(8))
    if image_decoding.CvBridge is None:
        with pytest.raises(ImageDecodeError, match='yuv422'):
            image_decoding.decode_image(odd)
    else:  # a ROS install: cv_bridge converts what the codec does not
        assert image_decoding.decode_image(odd).shape == (2, 2, 3)


def test_policy_status_message_from_a_report():
    if conversions.PolicyStatusMsg is None:
        pytest.skip('dreamzero_ros_interfaces not built (scripts/build_interfaces.sh)')
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
