# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What the launch files are made of: their description, the policy node, the package's tools.

``dreamzero.launch.py`` and ``sim.launch.py`` are each a table of arguments and a function of
their values (:func:`launch_description`); both start the policy node as one description says
(:func:`policy_node`: a launch_ros ``LifecycleNode``, brought up by its own ``autostart``
parameter, never launch_ros's), and the simulator's processes as :func:`tool_node`. Every
process is given launch's process id and ends with it
(:func:`~dreamzero_ros.core.processes.process_lifetime.launcher_env`), and SIGTERM stops them as
Ctrl-C does (:func:`~dreamzero_ros.ros.launch_signals.stop_cleanly_on_sigterm`).

Needs ``launch`` and ``launch_ros`` (a ROS 2 install); imported only by launch files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node

from dreamzero_ros.core.config.launch_plan import LaunchPlan
from dreamzero_ros.core.config.node_config import NODE_NAME
from dreamzero_ros.core.processes.process_lifetime import launcher_env
from dreamzero_ros.ros.launch_signals import stop_cleanly_on_sigterm
from launch import LaunchContext, LaunchDescription

PACKAGE = 'dreamzero_ros'


def launch_description(
    arguments: Mapping[str, tuple[str, str]], setup: Callable[[dict[str, str]], list[Any]]
) -> LaunchDescription:
    """SIGTERM handling, ``arguments`` declared, then the actions ``setup`` makes of their values.

    ``arguments``: ``name -> (default, description)``; ``setup`` gets ``name -> value``.
    """

    def perform(context: LaunchContext) -> list[Any]:
        return setup({name: LaunchConfiguration(name).perform(context) for name in arguments})

    return LaunchDescription(
        [
            OpaqueFunction(function=stop_cleanly_on_sigterm),
            *(
                DeclareLaunchArgument(name, default_value=default, description=description)
                for name, (default, description) in arguments.items()
            ),
            OpaqueFunction(function=perform),
        ]
    )


def policy_node(config: str, plan: LaunchPlan, namespace: str) -> LifecycleNode:
    """The policy node: a lifecycle node with the ``config`` file and ``plan``'s overrides."""
    return LifecycleNode(
        package=PACKAGE,
        executable='dreamzero-policy-node',
        name=NODE_NAME,
        namespace=namespace,
        parameters=[config, plan.node_parameters],
        additional_env=plan.node_env | launcher_env(),  # it ends with launch
        output='screen',
        emulate_tty=True,
    )


def tool_node(executable: str, name: str, namespace: str, **options: Any) -> Node:
    """A process of one of the package's tools (a simulated robot, a camera stream)."""
    return Node(
        package=PACKAGE,
        executable=executable,
        name=name,
        namespace=namespace,
        additional_env=launcher_env(),
        output='screen',
        **options,
    )
