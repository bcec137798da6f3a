# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Launch the simulated system: the policy node and a simulated robot with its cameras.

    ros2 launch dreamzero_ros sim.launch.py
    ros2 launch dreamzero_ros sim.launch.py preset:=tiny seed:=3
    ros2 launch dreamzero_ros sim.launch.py checkpoint:=/data/dz config:=/path/to/my.yaml
    ros2 launch dreamzero_ros sim.launch.py simulator:=kinematic

``simulator:=mujoco`` (the default): two processes close the loop on simulated time, the policy
node (a lifecycle node, brought up by its own ``autostart``, with ``use_sim_time``) and
``dreamzero-sim`` (MuJoCo physics behind joint_trajectory_controller's rules and splines and a
gripper controller, the DROID scene's three cameras rendered, ``/clock``, ``/tf``,
``robot_description``; the task ``~/task``, reset with ``~/reset``). ``simulator:=kinematic``:
three processes on the wall clock, the policy node, ``dreamzero-sim-arm`` (the same controllers,
perfectly tracked, no physics) and ``dreamzero-demo-stream`` publishing the three DROID camera
clips (synthetic frames where the clips are absent) without joint states. The robot's joints,
controller, gripper and camera topics are read from the node's config file
(``simulator_parameters``), so that the two agree. Without ``checkpoint`` (here or in the config)
the node runs a random-weight DreamZero of ``preset``, written once to
``$XDG_CACHE_HOME/dreamzero_ros`` by the real checkpoint writer. SIGTERM stops everything as
Ctrl-C does; each process is given launch's process id (``DREAMZERO_PARENT_PID``) and ends
with it, so that a SIGKILL of ``ros2 launch`` leaves no arm or camera behind.
"""

from pathlib import Path
from typing import Any

from ament_index_python.packages import get_package_share_directory

from dreamzero_ros.core.config.launch_plan import (
    plan_launch,
    sim_arm_parameters,
    simulator_parameters,
)
from dreamzero_ros.core.config.node_config import build_settings, read_params_file
from dreamzero_ros.ros.launch_actions import launch_description, policy_node, tool_node
from launch import LaunchDescription

ARGUMENTS = {
    'config': (
        str(Path(get_package_share_directory('dreamzero_ros')) / 'config' / 'cpu_small.yaml'),
        'Parameter file of the policy node; the simulated arm is made to match it.',
    ),
    'checkpoint': (
        '',
        "DreamZero checkpoint folder; empty: the config's, else a random-weight checkpoint of "
        'preset.',
    ),
    'preset': ('small', 'Random-weight engine preset (tiny or small) without a checkpoint.'),
    'namespace': ('', 'Namespace of the processes and their topics.'),
    'simulator': ('mujoco', 'mujoco (physics, rendered cameras, simulated time) or kinematic.'),
    'seed': ('0', 'mujoco: seed of the first episode (object placement).'),
}


def _launch_setup(args: dict[str, str]) -> list[Any]:
    config = args['config']
    values = read_params_file(config)
    checkpoint = args['checkpoint'] or values.get('engine.checkpoint', '')
    if not checkpoint:
        from dreamzero_ros.demo import DEFAULT_CACHE
        from dreamzero_ros.engine.loader import cached_random_checkpoint

        DEFAULT_CACHE.mkdir(parents=True, exist_ok=True)
        checkpoint, _ = cached_random_checkpoint(DEFAULT_CACHE, args['preset'])
    simulator = args['simulator']
    if simulator not in ('mujoco', 'kinematic'):
        raise ValueError(f'simulator must be mujoco or kinematic, got {simulator!r}')
    mujoco = simulator == 'mujoco'
    plan = plan_launch(values, checkpoint=str(checkpoint), use_sim_time=str(mujoco).lower())
    namespace = args['namespace']
    node = policy_node(config, plan, namespace)
    if mujoco:
        parameters = {**simulator_parameters(values), 'seed': int(args['seed'])}
        return [
            node,
            tool_node('dreamzero-sim', 'dreamzero_sim', namespace, parameters=[parameters]),
        ]
    camera_rate = min(build_settings(values).camera_rates_hz)
    return [
        node,
        tool_node(
            'dreamzero-sim-arm', 'sim_arm', namespace, parameters=[sim_arm_parameters(values)]
        ),
        tool_node(
            'dreamzero-demo-stream',
            'dreamzero_demo_stream',
            namespace,
            arguments=['--no-joint-states', '--rate', f'{camera_rate:g}'],
        ),
    ]


def generate_launch_description() -> LaunchDescription:
    """The launch description: SIGTERM handling, declared arguments, then the processes."""
    return launch_description(ARGUMENTS, _launch_setup)
