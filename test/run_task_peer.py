# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A RunTask action server in its own process, for test_package_interfaces.py.

Usage: ``run_task_peer.py ACTION_NAME``. Each goal sends feedback every 0.1 s (one more chunk
each time) until ``time_limit`` seconds or a cancel, then returns a result that echoes the goal.
Prints ``ready`` once the server exists.
"""

import sys
import time

import rclpy
from rclpy.action import ActionServer, CancelResponse
from rclpy.executors import MultiThreadedExecutor

from dreamzero_ros.action import RunTask


def execute(goal_handle):
    goal = goal_handle.request
    start = time.monotonic()
    chunks = 0
    outcome = 'time_limit'
    while time.monotonic() - start < goal.time_limit:
        if goal_handle.is_cancel_requested:
            outcome = 'canceled'
            break
        chunks += 1
        feedback = RunTask.Feedback(
            chunks_executed=chunks, elapsed=time.monotonic() - start, state='running'
        )
        goal_handle.publish_feedback(feedback)
        time.sleep(0.1)
    if outcome == 'canceled':
        goal_handle.canceled()
    else:
        goal_handle.succeed()
    return RunTask.Result(
        outcome=outcome,
        chunks_executed=chunks,
        elapsed=time.monotonic() - start,
        message=f'ran: {goal.instruction}',
    )


def main() -> None:
    rclpy.init()
    node = rclpy.create_node('run_task_peer')
    ActionServer(
        node,
        RunTask,
        sys.argv[1],
        execute_callback=execute,
        cancel_callback=lambda _: CancelResponse.ACCEPT,
    )
    print('ready', flush=True)
    executor = MultiThreadedExecutor()
    executor.add_node(node)
    try:
        executor.spin()
    except KeyboardInterrupt:
        pass


if __name__ == '__main__':
    main()
