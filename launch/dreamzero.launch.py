# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Launch the DreamZero policy node (which starts its engine worker ranks itself).

Examples (two GPUs: the unconditional CFG branch on the second; the DiT split over both)::

    ros2 launch dreamzero_ros dreamzero.launch.py checkpoint:=/data/dz gpus:=0,1 cfg_parallel:=2
    ros2 launch dreamzero_ros dreamzero.launch.py checkpoint:=/data/dz gpus:=0,1 tensor_parallel:=2

The node is a managed (lifecycle) node, started as launch_ros ``LifecycleNode``, so that
``ros2 lifecycle`` and lifecycle managers see it as any other. Its ``autostart`` parameter (the
config's, or the ``autostart`` argument) is the one mechanism that configures and activates it
at start-up; launch_ros's own lifecycle autostart (Kilted and later) stays off. With
``autostart:=false`` it waits, unconfigured, for ``ros2 lifecycle set <node> configure`` or a
lifecycle manager.

The config file is checked before anything starts: an unknown parameter or a bad value stops
the launch. SIGTERM to ``ros2 launch`` stops the node as Ctrl-C does (it holds, then exits);
if launch is killed outright, the node notices its parent's end and does the same.
"""

from pathlib import Path
from typing import Any

from ament_index_python.packages import get_package_share_directory

from dreamzero_ros.core.config.launch_plan import engine_launch_arguments, plan_launch
from dreamzero_ros.core.config.node_config import read_params_file
from dreamzero_ros.ros.launch_actions import launch_description, policy_node
from launch import LaunchDescription

ARGUMENTS = {
    'config': (
        str(Path(get_package_share_directory('dreamzero_ros')) / 'config' / 'droid.yaml'),
        'Parameter file of the policy node (/**: ros__parameters); config/droid.yaml is the 14B '
        'model on GPUs, config/cpu_small.yaml a small CPU profile.',
    ),
    **engine_launch_arguments(),
    'gpus': (
        '',
        'Comma-separated GPU indices, one per engine rank (cfg_parallel x tensor_parallel; rank '
        "r uses the r-th); empty: the config's engine.device for the node, the devices after it "
        'for the workers.',
    ),
    'openpi_bridge': ('', 'true serves the engine over OpenPI too; empty keeps the config value.'),
    'openpi_port': ('', 'TCP port of the OpenPI bridge; empty keeps the config value.'),
    'use_sim_time': ('false', 'Use /clock (rosbag replay, simulation).'),
    'dry_run': (
        '',
        'true publishes trajectories on the preview topic only; empty keeps the config value.',
    ),
    'autostart': (
        '',
        'true: the node configures and activates itself at start-up; false: it waits for '
        'lifecycle transitions (ros2 lifecycle, a lifecycle manager); empty keeps the config '
        'value.',
    ),
    'namespace': ('', 'Namespace of the node and its topics.'),
}


def _launch_setup(args: dict[str, str]) -> list[Any]:
    config = args.pop('config')
    namespace = args.pop('namespace')
    plan = plan_launch(read_params_file(config), **args)
    return [policy_node(config, plan, namespace)]


def generate_launch_description() -> LaunchDescription:
    """The launch description: SIGTERM handling, declared arguments, then the node."""
    return launch_description(ARGUMENTS, _launch_setup)
