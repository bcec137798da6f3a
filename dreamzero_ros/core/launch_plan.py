# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What ``dreamzero.launch.py`` starts, computed from its arguments without ROS.

One process: the policy node. With CFG parallel it starts its worker ranks itself at each
configure (:mod:`~dreamzero_ros.core.engine_workers`); ``gpus`` pins the node to the first GPU
(``CUDA_VISIBLE_DEVICES``) and hands the others to the workers (``engine.worker_gpus``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dreamzero_ros.core.node_config import build_settings


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


def plan_launch(
    config: dict[str, Any],
    *,
    checkpoint: str = '',
    gpus: str = '',
    cfg_parallel: str = '',
    dry_run: str = '',
    use_sim_time: str = 'false',
    openpi_bridge: str = '',
    openpi_port: str = '',
) -> LaunchPlan:
    """Turn the config file's values and the launch-argument strings into the node's overrides.

    ``config`` is what :func:`~dreamzero_ros.core.node_config.read_params_file` read from the
    config file. An empty argument keeps the config's value. With ``gpus``, rank ``r`` sees only
    ``gpus[r]`` (as ``cuda:0``); without, the config's ``engine.device`` holds (CUDA workers
    then take the devices after it).

    Raises:
        ValueError: a malformed argument or value, or fewer GPUs than CFG-parallel ranks.

    """
    parameters: dict[str, Any] = {'use_sim_time': _truthy(use_sim_time)}
    if checkpoint:
        parameters['engine.checkpoint'] = checkpoint
    if cfg_parallel:
        parameters['engine.cfg_parallel'] = int(cfg_parallel)
    if dry_run:
        parameters['dry_run'] = _truthy(dry_run)
    if openpi_bridge:
        parameters['openpi_bridge.enabled'] = _truthy(openpi_bridge)
    if openpi_port:
        parameters['openpi_bridge.port'] = int(openpi_port)
    values = {**config, **parameters}
    values.pop('use_sim_time')
    engine = build_settings(values).engine
    world_size = engine.cfg_parallel
    gpu_list = parse_gpus(gpus)
    if gpu_list and len(gpu_list) < world_size:
        raise ValueError(f'cfg_parallel {world_size} needs {world_size} GPUs, got gpus:={gpus}')
    if world_size > 1 and engine.backend != 'local':
        raise ValueError('cfg_parallel > 1 needs engine.backend local')
    if world_size > 1 and not engine.checkpoint:
        raise ValueError('cfg_parallel > 1 needs a checkpoint (the workers load it too)')
    node_env: dict[str, str] = {}
    if gpu_list:
        parameters['engine.device'] = 'cuda:0'
        parameters['engine.worker_gpus'] = ','.join(gpu_list[1:world_size])
        node_env['CUDA_VISIBLE_DEVICES'] = gpu_list[0]
    return LaunchPlan(parameters, node_env)
