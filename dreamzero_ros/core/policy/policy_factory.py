# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Build the policy the node's parameters ask for, and warm it up.

``engine.backend: local`` loads :class:`~dreamzero_ros.engine.DreamZeroEngine` from
``engine.checkpoint`` in this process (rank 0 of ``engine.cfg_parallel x
engine.tensor_parallel`` ranks when that is > 1; the other ranks are
``dreamzero-engine-worker`` processes it starts, :mod:`~dreamzero_ros.engine.workers.launch`).
The node's ``engine.*`` settings are the engine options (:class:`EngineSettings` extends
:class:`~dreamzero_ros.engine.options.EngineOptions`): they reach the engine whole.
``remote`` connects to an OpenPI server through the client the caller passes (the node passes
:class:`~dreamzero_ros.openpi.remote_policy.RemoteOpenPIPolicy`: ``openpi`` is a layer above
``core``, which does not import it).
"""

from __future__ import annotations

from collections.abc import Callable
import time
from typing import TYPE_CHECKING

import numpy as np

from dreamzero_ros.core.config.node_settings import NodeSettings
from dreamzero_ros.core.policy.api_keys import REMOTE_API_KEY_ENV, read_api_key
from dreamzero_ros.core.policy.serialized_policy import SerializedPolicy
from dreamzero_ros.core.robot.robot_layout import RobotLayout
from dreamzero_ros.engine.workers.launch import EngineRanks, load_on_ranks
from dreamzero_ros.log_forwarding import forwarded_logs
from dreamzero_ros.policy_types import Observation, Policy

if TYPE_CHECKING:  # torch, loaded with the engine
    from dreamzero_ros.engine.pipeline.denoise import BranchLayout
    from dreamzero_ros.engine.pipeline.engine import DreamZeroEngine

WARMUP_SESSION = '__warmup__'

#: A client of a remote policy server, from its URI and API key (None: no key).
RemoteClient = Callable[[str, str | None], Policy]


def create_policy(
    settings: NodeSettings,
    log: Callable[[str], None] = print,
    stop_requested: Callable[[], bool] = lambda: False,
    remote_client: RemoteClient | None = None,
) -> SerializedPolicy:
    """The policy of ``engine.backend``; raises on anything that prevents serving.

    ``engine.backend: remote`` connects with ``remote_client`` (required for it).

    With ``engine.cfg_parallel x engine.tensor_parallel`` > 1 this process starts the worker
    ranks and joins the group as rank 0 (:func:`~dreamzero_ros.engine.workers.launch.load_on_ranks`;
    ``stop_requested`` is polled while the workers load); closing the policy ends the workers and
    leaves the group.
    """
    options = settings.engine
    if options.backend == 'remote':
        if remote_client is None:
            raise ValueError('engine.backend remote needs a remote policy client')
        uri = options.remote_uri
        log(f'connecting to the OpenPI server at {uri}')
        api_key = read_api_key(options.remote_api_key_file, REMOTE_API_KEY_ENV, log)
        return SerializedPolicy(remote_client(uri, api_key))

    if not options.checkpoint:
        raise ValueError('engine.checkpoint is required with engine.backend local')

    from dreamzero_ros.engine.loader import load_engine
    from dreamzero_ros.engine.options import check_device

    check_device(options.device, 'engine.device')  # one line, before anything loads
    options = options.resolved()  # 'auto' device and dtype
    folder = options.checkpoint

    def load(layout: BranchLayout | None) -> DreamZeroEngine:
        log(f'loading DreamZero from {folder} on {options.device} ({options.dtype})')
        with forwarded_logs(log):  # a line per checkpoint file read
            return load_engine(folder, options, layout=layout)

    start = time.monotonic()
    ranks = EngineRanks(folder, options, options.master_addr, options.master_port)
    engine, on_close = load_on_ranks(ranks, load, log, stop_requested)
    log(f'loaded in {time.monotonic() - start:.1f} s')
    return SerializedPolicy(engine, on_close)


def warmup_observation(settings: NodeSettings, layout: RobotLayout) -> Observation:
    """A plausible observation of the policy's shape.

    Grey frames at the size the node gives each camera, every arm column (each trajectory
    group's joints with ``action_groups``) in the middle of its position limits, the grippers
    at 0.
    """
    config = settings.cache_for(layout)
    images = {}
    for camera in config.cameras:
        height, width = config.size_of(camera) or layout.camera_sizes.get(camera, (180, 320))
        images[camera] = np.full((height, width, 3), 128, dtype=np.uint8)
    arm_dof = len(config.arm_joints)  # the command row's arm columns come first
    limits = settings.loop.limits
    arm = (limits.lower[:arm_dof] + limits.upper[:arm_dof]) / 2
    return Observation(
        images=images,
        joint_position=arm,
        gripper_position=np.zeros(layout.gripper_dof),
        prompt=settings.prompt or 'warm up',
        session_id=WARMUP_SESSION,
    )


def warm_up(policy: Policy, settings: NodeSettings, layout: RobotLayout) -> float:
    """Run one inference in a throw-away session; returns its duration in seconds."""
    start = time.monotonic()
    policy.infer(warmup_observation(settings, layout))
    policy.reset(WARMUP_SESSION)
    return time.monotonic() - start
