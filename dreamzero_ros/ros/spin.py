# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""How a process's spin ends: quietly at Ctrl-C or a shutdown from outside, then off the graph."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.impl.implementation_singleton import rclpy_implementation
from rclpy.node import Node


@contextmanager
def until_shutdown() -> Iterator[None]:
    """End a spin quietly at Ctrl-C or at a shutdown from outside (a signal, a lost parent).

    A shutdown that lands while an executor builds its wait set raises rclpy's RCLError ("the
    given context is not valid"): that one ends the spin too; any other error is raised.
    """
    try:
        yield
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except rclpy_implementation.RCLError:
        if rclpy.ok():
            raise


def spin_until_shutdown(node: Node, duration: float = 0.0) -> None:
    """Spin ``node`` until Ctrl-C, a shutdown or ``duration`` seconds (0: no end); then destroy it.

    rclpy is shut down last (``try_shutdown``: also when something else already shut it down).
    """
    try:
        with until_shutdown():
            if duration > 0:
                end = node.get_clock().now().nanoseconds * 1e-9 + duration
                while rclpy.ok() and node.get_clock().now().nanoseconds * 1e-9 < end:
                    rclpy.spin_once(node, timeout_sec=0.1)
            else:
                rclpy.spin(node)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
