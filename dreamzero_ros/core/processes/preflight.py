# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The checks of ``dreamzero-preflight``, without ROS: one verdict per check, with what to fix.

The ROS layer (ros/preflight.py) listens to the live system for a few seconds and hands what it
saw to these functions: arrival times and decode results of each camera topic, the robot
description, the arm's measured pose, and the device's free memory against the engine's
estimate. The action groups' checks (joints, controllers, odometry) are in
core/processes/preflight_groups.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dreamzero_ros.core.motion.envelope import Envelope

#: A topic passes at this fraction of its expected rate (jitter, the listening window's edges).
RATE_TOLERANCE = 0.8
GIB = 2**30


@dataclass(frozen=True)
class Check:
    """One check's verdict: ``detail`` says what was found, ``fix`` what to do when it failed."""

    name: str
    ok: bool
    detail: str
    fix: str = ''

    def line(self) -> str:
        """``[ OK ] name: detail`` or ``[FAIL] name: detail -> fix``."""
        if self.ok:
            return f'[ OK ] {self.name}: {self.detail}'
        return f'[FAIL] {self.name}: {self.detail} -> {self.fix}'


def exit_code(checks: Iterable[Check]) -> int:
    """0 when every check passed, 1 otherwise."""
    return 0 if all(check.ok for check in checks) else 1


def topic_rate(
    topic: str, arrivals: Sequence[float], expected_hz: float, window: float, publishers: int
) -> Check:
    """``topic`` published at ``expected_hz`` or faster during the ``window`` seconds listened.

    ``publishers``: how many publishers of ``topic`` the graph showed (tells a topic nobody
    publishes from one whose publishers send nothing this subscriber can take).
    """
    name = f'rate {topic}'
    if not arrivals and not publishers:
        return Check(
            name,
            False,
            f'no message in {window:g} s, no publisher',
            f'start the publisher of {topic}, or remap the node parameter naming it',
        )
    if not arrivals:
        return Check(
            name,
            False,
            f'no message in {window:g} s from {publishers} publisher(s)',
            f'check that they publish (ros2 topic hz {topic})',
        )
    if len(arrivals) < 2:
        return Check(name, False, '1 message', f'publish {topic} at {expected_hz:g} Hz or more')
    rate = (len(arrivals) - 1) / max(arrivals[-1] - arrivals[0], 1e-9)
    if rate < RATE_TOLERANCE * expected_hz:
        return Check(
            name,
            False,
            f'{rate:.1f} Hz, expected {expected_hz:g} Hz',
            f'publish {topic} at {expected_hz:g} Hz or more (QoS, bandwidth, driver settings)',
        )
    return Check(name, True, f'{rate:.1f} Hz (expected {expected_hz:g})')


def image_decodes(topic: str, error: str | None, encoding: str) -> Check:
    """The newest frame of ``topic`` decodes (``error`` is the decoder's message, or None)."""
    name = f'encoding {topic}'
    if error is None:
        return Check(name, True, encoding)
    return Check(
        name,
        False,
        f'{encoding}: {error}',
        'publish rgb8/bgr8/mono8/rgba8/bgra8 or jpeg/png (image_transport compressed), or '
        'install cv_bridge',
    )


def description_joints(arm_joints: Sequence[str], description_joints: Iterable[str]) -> Check:
    """Every arm joint (of every position group) is a joint of the robot description."""
    known = set(description_joints)
    absent = [name for name in arm_joints if name not in known]
    if not absent:
        return Check('description joints', True, f'all {len(arm_joints)} arm joints described')
    return Check(
        'description joints',
        False,
        f'the robot description lacks {absent}',
        "publish the robot's own description on robot_description (or set "
        'robot_description.file), or fix the joints of the action groups (arm_joint_names)',
    )


def pose_in_envelope(envelope: Envelope, joints: np.ndarray) -> Check:
    """The arm's measured pose lies inside the envelope."""
    positions = envelope.points.positions(np.asarray(joints, dtype=np.float64))
    slack = envelope.slack(positions)[0]
    point, bound = np.unravel_index(int(np.argmin(slack)), slack.shape)
    link, nearest = envelope.points.links[point], envelope.bounds[bound]
    if slack[point, bound] < 0:
        return Check(
            'pose in envelope',
            False,
            f'{link} is {-slack[point, bound]:.3f} m beyond {nearest}',
            'move the arm inside the envelope by hand (or fix envelope.* / the table height)',
        )
    return Check(
        'pose in envelope', True, f'closest: {link} {slack[point, bound]:.3f} m from {nearest}'
    )


def device_memory(need: int, free: int | None, device: str, parts: str) -> Check:
    """The engine's estimated memory fits the device's free memory (None: not measurable)."""
    name = 'GPU memory'
    if free is None:
        return Check(name, True, f'{device}: not a CUDA device, {need / GIB:.1f} GiB host memory')
    if need > free:
        return Check(
            name,
            False,
            f'{device} needs {need / GIB:.1f} GiB ({parts}), {free / GIB:.1f} GiB free',
            'free the GPU, or use the memory options (engine.fp8_linear, engine.text_encoder '
            'offload, engine.kv_cache fp8, engine.cfg_parallel / tensor_parallel)',
        )
    return Check(name, True, f'{device}: {need / GIB:.1f} of {free / GIB:.1f} GiB free')


def engine_memory(options: Any) -> Check:
    """The local engine of ``options`` (``settings.engine``) fits its device's free memory.

    The estimate is the one configure refuses with (engine/memory/estimate.py), for the rank
    this process would run: one CFG row under ``cfg_parallel: 2``, a ``1 / tensor_parallel``
    shard of the DiT.
    """
    if options.backend != 'local':
        return Check('GPU memory', True, f'{options.backend} engine: its server holds the model')
    if not options.checkpoint:
        if options.device == 'cpu':  # sim.launch.py and dreamzero-demo give it a random one
            return Check(
                'GPU memory',
                True,
                'cpu: no GPU memory needed (engine.checkpoint empty: sim.launch.py and '
                'dreamzero-demo give the node a random-weight checkpoint of a preset)',
            )
        return Check('GPU memory', False, 'engine.checkpoint is empty', 'set engine.checkpoint')
    from dreamzero_ros.engine.checkpoint.upstream_config import read_config
    from dreamzero_ros.engine.memory.estimate import device_budget, estimate_memory
    from dreamzero_ros.errors import DreamZeroError

    try:
        config = read_config(options.checkpoint, options)  # the node's settings: the options
    except (DreamZeroError, OSError, ValueError) as error:
        return Check('GPU memory', False, f'{options.checkpoint}: {error}', 'fix engine.checkpoint')
    rows = max(1, config.sampling.cfg_rows // options.cfg_parallel)
    estimate = estimate_memory(config, rows, options.tensor_parallel)
    try:
        budget = options.memory_budget or device_budget(config.device)
    except (RuntimeError, AssertionError) as error:
        return Check(
            'GPU memory',
            False,
            f'{config.device}: {error}',
            'check the GPU driver and CUDA_VISIBLE_DEVICES, or set engine.device',
        )
    return device_memory(estimate.total, budget, config.device, estimate.describe())
