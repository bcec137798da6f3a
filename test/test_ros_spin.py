# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``ros.spin.until_shutdown``: a spin ends quietly at a shutdown, never hides a real failure."""

import pytest
import rclpy
from rclpy.impl.implementation_singleton import rclpy_implementation

from dreamzero_ros.ros.spin import until_shutdown


def test_a_wait_set_error_after_shutdown_ends_the_spin_and_one_before_is_raised():
    rclpy.init()
    try:
        with pytest.raises(rclpy_implementation.RCLError):  # rclpy still up: a real failure
            with until_shutdown():
                raise rclpy_implementation.RCLError('failed to initialize wait set')
    finally:
        rclpy.try_shutdown()
    with until_shutdown():  # the context is gone: the race of a shutdown from outside
        raise rclpy_implementation.RCLError('the given context is not valid')
    with until_shutdown():
        raise KeyboardInterrupt
    with pytest.raises(ValueError):
        with until_shutdown():
            raise ValueError('not a shutdown')
