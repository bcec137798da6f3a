# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Console script ``dreamzero-policy-node``: run the policy node until asked to stop.

SIGINT, SIGTERM, or the end of the parent process (``ros2 launch`` killed, a closed terminal)
ask the spin loop to stop; the node then holds (if it was commanding), deactivates and cleans
up in order. A second signal interrupts; after the parent's end the process exits within
:data:`PARENT_LOST_GRACE` seconds whatever the clean-up is doing.

The parent is watched from the start: this module imports
:mod:`~dreamzero_ros.core.processes.process_lifetime` (which reads the parent's id) before anything
slow, and ``main`` starts the watchdog before importing rclpy, the node or the engine; a parent that
exits before the node exists ends the process at once.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
import os
import signal
import sys
import threading
from typing import Any

# Reads the parent's id: no slow import (rclpy, torch) at module level before it.
from dreamzero_ros.core.processes.process_lifetime import ParentWatchdog, flush_outputs

#: Longest time (wall-clock seconds) the executor waits before a stop request is seen.
SIGNAL_POLL_PERIOD = 0.2
#: Seconds from noticing the parent's end to exiting whatever the main thread is doing (it
#: normally exits sooner, as soon as the hold is out): time to hold, not to finish an inference.
PARENT_LOST_GRACE = 0.7

#: The node's exit codes, in --help.
EXIT_CODES_HELP = (
    'exit codes: 0 stopped (Ctrl-C, SIGTERM), 1 configure or activate failed, or the parent '
    'process ended, 2 invalid arguments or parameters (a parameter file that rcl cannot parse, '
    'an unknown parameter, a value of the wrong type or out of range)'
)


class StopRequest:
    """SIGINT/SIGTERM handler: the first signal asks the spin loop to stop, a second interrupts.

    The first signal only sets a flag, so that no KeyboardInterrupt lands inside a callback or a
    lock held by rclpy or the inference thread; the loop then holds and cleans up in order.
    """

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.parent_gone = False
        self.wake: Callable[[], None] = lambda: None

    def __call__(self, signum: int, frame: Any) -> None:
        """Handle one signal."""
        if self.requested.is_set():
            raise KeyboardInterrupt
        self.requested.set()

    def parent_lost(self) -> None:
        """The parent process ended (called from the watchdog thread): stop like on SIGTERM."""
        self.parent_gone = True
        self.requested.set()
        self.wake()
        try:
            print('dreamzero-policy-node: parent process ended, stopping', file=sys.stderr)
        except (OSError, ValueError):
            pass


def build_parser() -> argparse.ArgumentParser:
    """Command-line interface of ``dreamzero-policy-node``: ROS arguments only."""
    from dreamzero_ros.cli_options import ListingHelpFormatter, new_parser
    from dreamzero_ros.core.config.node_config import PARAMETERS
    from dreamzero_ros.parameter_schema import parameters_help

    return new_parser(
        'dreamzero-policy-node',
        'DreamZero policy node (ROS 2 lifecycle node). Example:\n'
        '  dreamzero-policy-node --ros-args --params-file config/cpu_small.yaml \\\n'
        '      -p engine.checkpoint:=/path/to/ckpt',
        epilog=f'{parameters_help(PARAMETERS)}\n\n{EXIT_CODES_HELP}',
        formatter_class=ListingHelpFormatter,
    )


def main(args: list[str] | None = None) -> int:
    """Console script ``dreamzero-policy-node``."""
    watchdog = ParentWatchdog(None, grace=PARENT_LOST_GRACE).start()
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.signals import SignalHandlerOptions

    from dreamzero_ros.ros.ros_arguments import tool_arguments
    from dreamzero_ros.ros.spin import until_shutdown

    argv = sys.argv[1:] if args is None else args
    parser = build_parser()
    try:
        parser.parse_args(tool_arguments(argv))
    except ValueError as error:
        parser.error(str(error))

    from dreamzero_ros.ros.policy_node import PolicyNode

    rclpy.init(args=['prog', *argv], signal_handler_options=SignalHandlerOptions.NO)
    stop = StopRequest()
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    watchdog.on_lost = stop.parent_lost
    try:
        node = PolicyNode(stop_requested=stop.requested)
    except ValueError as error:
        print(f'dreamzero-policy-node: {error}', file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    stop.wake = node.create_guard_condition(lambda: None).trigger
    status = 0
    try:
        with until_shutdown():
            if node.get_parameter('autostart').value:
                if node.trigger_configure() != TransitionCallbackReturn.SUCCESS:
                    node.get_logger().fatal('autostart: configure failed')
                    status = 1
                elif node.trigger_activate() != TransitionCallbackReturn.SUCCESS:
                    node.get_logger().fatal('autostart: activate failed')
                    status = 1
            while status == 0 and rclpy.ok() and not stop.requested.is_set():
                # A bounded wait lets SIGINT/SIGTERM be seen even while /clock is paused.
                executor.spin_once(timeout_sec=SIGNAL_POLL_PERIOD)
    finally:
        if node.lifecycle_state == 'active':
            node.trigger_deactivate()
        if stop.parent_gone:  # the hold is out; the kernel ends the worker ranks with us
            flush_outputs()
            os._exit(1)
        if node.lifecycle_state == 'inactive':
            node.trigger_cleanup()
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return status


if __name__ == '__main__':
    sys.exit(main())
