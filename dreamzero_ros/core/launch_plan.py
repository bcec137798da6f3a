# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What ``dreamzero.launch.py`` starts, computed from its arguments without ROS.

The policy node is rank 0 of the CFG-parallel group; ranks 1.. are ``dreamzero-engine-worker``
processes, each pinned to one GPU through ``CUDA_VISIBLE_DEVICES`` and joined through the
``torch.distributed`` environment variables, so that nobody has to run ``torchrun``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dreamzero_ros.core.node_config import build_settings

WORKER_EXECUTABLE = 'dreamzero-engine-worker'


@dataclass(frozen=True)
class ProcessSpec:
    """One process to start: command line and extra environment."""

    cmd: list[str]
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LaunchPlan:
    """Node parameter overrides, the node's environment, and the worker processes."""

    node_parameters: dict[str, Any]
    node_env: dict[str, str]
    workers: list[ProcessSpec]


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
    """Turn the config file's values and the launch-argument strings into processes.

    ``config`` is what :func:`~dreamzero_ros.core.node_config.read_params_file` read from the
    config file. An empty argument keeps the config's value. With ``gpus``, rank ``r`` sees only
    ``gpus[r]`` (as ``cuda:0``); without, CUDA ranks get GPUs 0, 1, ... and CPU ranks use the
    config's ``engine.device``.

    Raises:
        ValueError: a malformed argument, or fewer GPUs than CFG-parallel ranks.

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
    if not gpu_list and world_size > 1 and engine.device.startswith('cuda'):
        gpu_list = [str(rank) for rank in range(world_size)]  # NCCL needs one GPU per rank
    node_env: dict[str, str] = {}
    device = engine.device
    if gpu_list:
        parameters['engine.device'] = device = 'cuda:0'
        node_env['CUDA_VISIBLE_DEVICES'] = gpu_list[0]
    if gpu_list and len(gpu_list) < world_size:
        raise ValueError(f'cfg_parallel {world_size} needs {world_size} GPUs, got gpus:={gpus}')
    if world_size > 1 and engine.backend != 'local':
        raise ValueError('cfg_parallel > 1 needs engine.backend local')
    if world_size > 1 and not engine.checkpoint:
        raise ValueError('cfg_parallel > 1 needs a checkpoint (the workers load it too)')
    workers = []
    for rank in range(1, world_size):
        env = {
            'RANK': str(rank),
            'WORLD_SIZE': str(world_size),
            'MASTER_ADDR': engine.master_addr,
            'MASTER_PORT': str(engine.master_port),
        }
        if gpu_list:
            env['CUDA_VISIBLE_DEVICES'] = gpu_list[rank]
        cmd = [
            WORKER_EXECUTABLE,
            '--checkpoint',
            engine.checkpoint,
            '--device',
            device,
            '--dtype',
            engine.dtype,
        ]
        workers.append(ProcessSpec(cmd, env))
    return LaunchPlan(parameters, node_env, workers)
