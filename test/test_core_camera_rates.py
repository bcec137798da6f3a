# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Received camera rates against the expected ones, the repeat limiter, the camera timing checks."""

import pytest

from dreamzero_ros.core.config.node_config import build_settings
from dreamzero_ros.core.control.repeat_limiter import RepeatLimiter
from dreamzero_ros.core.observations.camera_rates import CameraRateMonitor


def _feed(monitor, camera, rate, start, seconds):
    for k in range(int(rate * seconds)):
        monitor.record(camera, 1, start + k / rate)


def test_a_camera_received_below_its_rate_is_slow_after_a_full_window():
    monitor = CameraRateMonitor({'wrist': 15.0, 'exterior': 5.0})
    monitor.start(100.0)
    _feed(monitor, 'wrist', 15.0, 100.0, 3.0)
    _feed(monitor, 'exterior', 2.0, 100.0, 3.0)
    assert all(rate.measured is None for rate in monitor.rates(101.0))  # window not yet full
    wrist, exterior = monitor.rates(103.0)
    assert wrist.measured == pytest.approx(15.0, abs=0.6) and not wrist.slow
    assert exterior.measured == pytest.approx(2.0, abs=0.6) and exterior.slow
    assert str(exterior) == "camera 'exterior' received at 1.5 Hz, expected 5 Hz"


def test_nothing_is_measured_while_the_node_does_not_read():
    monitor = CameraRateMonitor({'wrist': 15.0})
    monitor.record('wrist', 1, 1.0)
    assert monitor.rates(10.0)[0].measured is None
    monitor.start(10.0)
    assert monitor.rates(12.0)[0].slow  # reading, and no frame for a whole window
    monitor.stop()
    assert monitor.rates(20.0)[0].measured is None


def test_repeat_limiter_logs_each_kind_once_per_period_and_counts_the_rest():
    limiter = RepeatLimiter(10.0)
    assert limiter.admit('stale', 0.0) == ''
    assert limiter.admit('skewed', 1.0) == ''  # another kind is not held back
    assert limiter.admit('stale', 2.0) is None
    assert limiter.admit('stale', 5.0) is None
    assert limiter.admit('stale', 12.0) == ' (2 more since 12.0 s ago, not logged)'
    assert limiter.admit('stale', 30.0) == ''


@pytest.mark.parametrize(
    ('override', 'skew'),
    [({}, 0.2), ({'camera_rates_hz': [5.0]}, 0.3), ({'camera_rates_hz': [30.0, 15.0, 5.0]}, 0.3),
     ({'max_skew': 0.25}, 0.25)],
)  # fmt: skip
def test_max_skew_zero_is_derived_from_the_slowest_camera(override, skew):
    assert build_settings(override).skew_limit == pytest.approx(skew)
    assert build_settings(override).cache.max_skew == pytest.approx(skew)


@pytest.mark.parametrize(
    ('override', 'message'),
    [
        ({'camera_rates_hz': [5.0], 'max_skew': 0.2}, r'max_skew 0.2 s is not longer than one '
         r'period of the slowest camera \(5 Hz: 0.2 s\).*or 0 for 0.3 s'),
        ({'camera_rates_hz': [1.0], 'max_skew': 1.5}, 'max_age 0.5 s is not longer than one'),
        ({'camera_rates_hz': [60.0]}, 'camera_qos.depth 3 .* set it >= 5'),
        ({'camera_rates_hz': [15.0, 15.0]}, 'camera_rates_hz needs one value, or one per'),
        ({'camera_qos.reliability': 'system_default'}, 'camera_qos.reliability: must be one of'),
    ],
)  # fmt: skip
def test_camera_timing_that_cannot_work_is_refused_at_configure(override, message):
    with pytest.raises(ValueError, match=message):
        build_settings(override)
