# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What the launch files start, computed from their arguments without ROS.

``dreamzero.launch.py`` starts one process: the policy node, as a lifecycle node. With CFG or
tensor parallel it starts its worker ranks itself at each configure
(:mod:`~dreamzero_ros.engine.workers.launch`); ``gpus`` pins the node to the first GPU
(``CUDA_VISIBLE_DEVICES``) and hands the others to the workers (``engine.worker_gpus``), one per
rank. The node's ``autostart`` parameter (configure and activate at start-up) is the one
mechanism that brings it up; launch_ros's own lifecycle autostart is left off, and
``autostart:=false`` leaves the transitions to ``ros2 lifecycle`` or a lifecycle manager.
``sim.launch.py`` adds the simulator (:func:`simulator_parameters`), or the kinematic simulated
arm (:func:`sim_arm_parameters`) and the camera stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dreamzero_ros.core.config.node_config import PARAMETERS, build_settings
from dreamzero_ros.policy_types import DROID_CAMERAS

#: Launch arguments that set the ``engine.*`` parameter of their name.
ENGINE_LAUNCH_ARGUMENTS = (
    'checkpoint',
    'base_checkpoint',
    'encoder_dir',
    'embodiment_tag',
    'embodiment_file',
    'prompt_template',
    'cfg_parallel',
    'tensor_parallel',
)


def engine_launch_arguments() -> dict[str, tuple[str, str]]:
    """``name -> (default, description)`` of :data:`ENGINE_LAUNCH_ARGUMENTS`, from the parameters.

    Each defaults to empty, which keeps the config file's value.
    """
    specs = {spec.name: spec for spec in PARAMETERS}
    return {
        name: (
            '',
            f'{specs[f"engine.{name}"].description} Sets engine.{name}; empty keeps the config '
            'file value.',
        )
        for name in ENGINE_LAUNCH_ARGUMENTS
    }


@dataclass(frozen=True)
class LaunchPlan:
    """Node parameter overrides and the node's environment."""

    node_parameters: dict[str, Any]
    node_env: dict[str, str]


def _truthy(text: str) -> bool:
    value = text.strip().lower()
    if value not in ('true', 'false', '1', '0', 'yes', 'no'):
        raise ValueError(f'expected true or false, got {text!r}')
    return value in ('true', '1', 'yes')


def parse_gpus(text: str) -> list[str]:
    """``'0,1'`` -> ``['0', '1']``; empty -> ``[]`` (keep the config's device)."""
    gpus = [part.strip() for part in text.split(',') if part.strip()]
    if any(not gpu.isdigit() for gpu in gpus):
        raise ValueError(f'gpus must be comma-separated GPU indices, got {text!r}')
    return gpus


def _integer(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError as error:
        raise ValueError(f'{name} must be an integer, got {text!r}') from error


def plan_launch(
    config: dict[str, Any],
    *,
    checkpoint: str = '',
    base_checkpoint: str = '',
    encoder_dir: str = '',
    embodiment_tag: str = '',
    embodiment_file: str = '',
    prompt_template: str = '',
    gpus: str = '',
    cfg_parallel: str = '',
    tensor_parallel: str = '',
    dry_run: str = '',
    autostart: str = '',
    use_sim_time: str = 'false',
    openpi_bridge: str = '',
    openpi_port: str = '',
) -> LaunchPlan:
    """Turn the config file's values and the launch-argument strings into the node's overrides.

    ``config`` is what :func:`~dreamzero_ros.core.config.node_config.read_params_file` read from the
    config file. An empty argument keeps the config's value; the checkpoint and embodiment
    arguments, ``cfg_parallel`` and ``tensor_parallel`` set the ``engine.*`` parameter of their
    name. With ``gpus``, rank ``r`` of the ``cfg_parallel x tensor_parallel`` ranks sees only
    ``gpus[r]`` (as ``cuda:0``); without, the config's ``engine.device`` holds (CUDA workers then
    take the devices after it).

    Raises:
        ValueError: a malformed argument or value, or fewer GPUs than ranks.

    """
    parameters: dict[str, Any] = {'use_sim_time': _truthy(use_sim_time)}
    strings = {
        'checkpoint': checkpoint,
        'base_checkpoint': base_checkpoint,
        'encoder_dir': encoder_dir,
        'embodiment_tag': embodiment_tag,
        'embodiment_file': embodiment_file,
        'prompt_template': prompt_template,
    }
    for name, value in strings.items():
        if value:
            parameters[f'engine.{name}'] = value
    for name, value in (('cfg_parallel', cfg_parallel), ('tensor_parallel', tensor_parallel)):
        if value:
            parameters[f'engine.{name}'] = _integer(name, value)
    if dry_run:
        parameters['dry_run'] = _truthy(dry_run)
    if autostart:
        parameters['autostart'] = _truthy(autostart)
    if openpi_bridge:
        parameters['openpi_bridge.enabled'] = _truthy(openpi_bridge)
    if openpi_port:
        parameters['openpi_bridge.port'] = int(openpi_port)
    values = {**config, **parameters}
    values.pop('use_sim_time')
    engine = build_settings(values).engine
    world_size = engine.cfg_parallel * engine.tensor_parallel
    ranks = (
        f'cfg_parallel {engine.cfg_parallel} x tensor_parallel {engine.tensor_parallel} = '
        f'{world_size} ranks'
    )
    gpu_list = parse_gpus(gpus)
    if gpu_list and len(gpu_list) < world_size:
        raise ValueError(f'{ranks} need {world_size} GPUs, one each; got gpus:={gpus}')
    if world_size > 1 and engine.backend != 'local':
        raise ValueError(f'{ranks} need engine.backend local')
    if world_size > 1 and not engine.checkpoint:
        raise ValueError(f'{ranks} need a checkpoint (the workers load it too)')
    node_env: dict[str, str] = {}
    if gpu_list:
        parameters['engine.device'] = 'cuda:0'
        parameters['engine.worker_gpus'] = ','.join(gpu_list[1:world_size])
        node_env['CUDA_VISIBLE_DEVICES'] = gpu_list[0]
    return LaunchPlan(parameters, node_env)


def sim_arm_parameters(config: dict[str, Any]) -> dict[str, Any]:
    """``dreamzero-sim-arm`` parameters that make the simulated arm the robot of ``config``.

    Its joints, controller, joint-state topic and gripper (joint, open position, command
    interface and name) follow the node's parameters, so that the two agree by construction.

    Raises:
        ValueError: a config the simulated arm cannot serve (a trajectory topic not ending in
            ``/joint_trajectory``).

    """
    settings = build_settings(config)
    controller, _, leaf = settings.trajectory_topic.rpartition('/')
    if leaf != 'joint_trajectory' or not controller:
        raise ValueError(
            f'the simulated arm serves <controller>/joint_trajectory, not '
            f'{settings.trajectory_topic!r}'
        )
    parameters: dict[str, Any] = {
        'joints': list(settings.arm_joint_names),
        'controller': controller,
        'joint_states_topic': settings.joint_states_topic,
        'gripper.joint': settings.gripper_joint_name,
    }
    if settings.gripper_joint_name:
        parameters['gripper.initial_position'] = float(settings.gripper_range[0])
        parameters['gripper.interface'] = settings.gripper.interface
        parameters['gripper.name'] = settings.gripper.command_name
    return parameters


def simulator_parameters(
    config: dict[str, Any], cameras: tuple[str, ...] = DROID_CAMERAS
) -> dict[str, Any]:
    """``dreamzero-sim`` parameters that make the simulated robot the robot of ``config``.

    Those of :func:`sim_arm_parameters`, and the image topic of each of the scene's
    ``cameras`` (named by the policy's camera keys): the topic the node reads that camera on.

    Raises:
        ValueError: as :func:`sim_arm_parameters`, or a scene camera the node does not read.

    """
    parameters = sim_arm_parameters(config)
    topics = build_settings(config).cameras
    missing = [camera for camera in cameras if camera not in topics]
    if missing:
        raise ValueError(f'the node reads no camera {", ".join(missing)} (its camera_keys)')
    parameters['cameras.topics'] = [topics[camera] for camera in cameras]
    return parameters
