# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The process of a simulated robot: its command line, and its run until Ctrl-C.

``dreamzero-sim-arm`` and ``dreamzero-sim`` take ROS arguments only; ``--help`` lists their
declared parameters. A bad parameter ends the process in one line (exit code 2); it ends with
its parent process too (``ros2 launch`` killed: no simulated robot left behind).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
import sys
from typing import TYPE_CHECKING

import rclpy
from rclpy.executors import MultiThreadedExecutor

from dreamzero_ros.cli_options import ListingHelpFormatter, new_parser
from dreamzero_ros.core.processes.process_lifetime import ParentWatchdog
from dreamzero_ros.parameter_schema import parameter_specs, parameters_help
from dreamzero_ros.ros.ros_arguments import tool_arguments
from dreamzero_ros.ros.spin import until_shutdown

if TYPE_CHECKING:
    from dreamzero_ros.ros.sim_arm import SimArm

#: The exit codes, in --help.
EXIT_CODES_HELP = 'exit codes: 0 stopped (Ctrl-C), 2 invalid arguments or parameters'


@dataclass(frozen=True)
class RobotCommand:
    """The console script of a simulated robot: ROS arguments only, ``parameters`` listed.

    Attributes:
        prog: the script's name.
        description: its --help text (the node module's docstring).
        parameters: the dataclass of the node's declared parameters.
        make: the node, built without arguments once rclpy is initialised.

    """

    prog: str
    description: str
    parameters: type
    make: type[SimArm]

    def build_parser(self) -> argparse.ArgumentParser:
        """The command line: ROS arguments only, the parameters' fields listed in --help."""
        return new_parser(
            self.prog,
            self.description,
            usage='%(prog)s [-h] [--ros-args -p name:=value ...]',
            epilog=f'{parameters_help(parameter_specs(self.parameters))}\n\n{EXIT_CODES_HELP}',
            formatter_class=ListingHelpFormatter,
        )

    def main(self, args: list[str] | None = None) -> int:
        """Run the node until Ctrl-C; a bad parameter ends in one line (exit code 2).

        It ends with its parent process too (``ros2 launch`` killed: no simulated robot left).
        """
        prog, parser = self.prog, self.build_parser()
        watchdog = ParentWatchdog(None).start()
        argv = sys.argv[1:] if args is None else args
        try:
            parser.parse_args(tool_arguments(argv))
        except ValueError as error:
            parser.error(str(error))
        rclpy.init(args=[prog, *argv])
        watchdog.on_lost = rclpy.try_shutdown  # leave the graph, then exit
        node = None
        try:
            node = self.make()
            node.start()
        except (OSError, RuntimeError, ValueError) as error:
            print(f'{prog}: {error}', file=sys.stderr)
            if node is not None:
                node.stop()
                node.destroy_node()
            rclpy.try_shutdown()
            return 2
        executor = MultiThreadedExecutor(num_threads=2)
        for each in node.nodes():
            executor.add_node(each)
        node.get_logger().info(node.ready_line())
        try:
            with until_shutdown():
                executor.spin()
        finally:
            node.stop()
            executor.shutdown()
            node.destroy_node()
            rclpy.try_shutdown()
        return 0
