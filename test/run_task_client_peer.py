# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A ``~/run_task`` client in its own process, for test_node_run_task.py (killed mid-goal).

Usage: ``run_task_client_peer.py ACTION_NAME INSTRUCTION``. Sends one goal without a time
limit, prints ``accepted`` (or ``rejected``) and then waits to be killed.
"""

import sys
import time

import rclpy
from rclpy.action import ActionClient

from dreamzero_ros.action import RunTask


def main() -> None:
    rclpy.init()
    node = rclpy.create_node('run_task_client_peer')
    client = ActionClient(node, RunTask, sys.argv[1])
    client.wait_for_server()
    future = client.send_goal_async(RunTask.Goal(instruction=sys.argv[2], time_limit=0.0))
    rclpy.spin_until_future_complete(node, future)
    print('accepted' if future.result().accepted else 'rejected', flush=True)
    while True:
        time.sleep(3600)


if __name__ == '__main__':
    main()
