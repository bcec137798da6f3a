# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Spin a node until Ctrl-C or shutdown, then leave the graph: the end of a one-node process."""

from __future__ import annotations

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node


def spin_until_shutdown(node: Node, duration: float = 0.0) -> None:
    """Spin ``node`` until Ctrl-C, a shutdown or ``duration`` seconds (0: no end); then destroy it.

    rclpy is shut down last (``try_shutdown``: also when something else already shut it down).
    """
    try:
        if duration > 0:
            end = node.get_clock().now().nanoseconds * 1e-9 + duration
            while rclpy.ok() and node.get_clock().now().nanoseconds * 1e-9 < end:
                rclpy.spin_once(node, timeout_sec=0.1)
        else:
            rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
