# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Synthetic DROID data: plausible statistics, DROID's embodiment with them, observations.

Random-weight engines (:meth:`.pipeline.DreamZeroEngine.from_config`, :mod:`.random_checkpoint`)
serve :func:`droid_embodiment` (the packaged DROID embodiment file with the statistics of
:func:`droid_metadata`) at the view size of their preset; benchmarks and tests feed
:func:`random_observation`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from dreamzero_ros.engine.checkpoint.experiment_cfg import load_embodiment_file
from dreamzero_ros.engine.embodiment import EMBODIMENTS_DIR, Camera, Embodiment
from dreamzero_ros.errors import EmbodimentError
from dreamzero_ros.policy_types import DROID_CAMERAS, Observation

__all__ = [
    'DROID_VIEW_SIZES',
    'droid_embodiment',
    'droid_embodiment_for',
    'droid_metadata',
    'random_observation',
]

#: DROID's view size for each model preset, by its tokens per latent frame (``frame_seqlen``):
#: the published 14B model, the demo's ``small`` and the tests' ``tiny``.
DROID_VIEW_SIZES: dict[int, tuple[int, int]] = {880: (176, 320), 32: (32, 64), 8: (16, 32)}

# Franka Panda joint limits (rad), the range of DROID joint positions.
_JOINT_LOW = [-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973]
_JOINT_HIGH = [2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973]


def _stats(q01: list[float], q99: list[float]) -> dict[str, list[float]]:
    low, high = np.asarray(q01), np.asarray(q99)
    return {
        'min': (low - 0.05).tolist(),
        'max': (high + 0.05).tolist(),
        'mean': ((low + high) / 2).tolist(),
        'std': ((high - low) / 4).tolist(),
        'q01': low.tolist(),
        'q99': high.tolist(),
    }


def droid_metadata(resolution: tuple[int, int] = (180, 320)) -> dict[str, Any]:
    """``experiment_cfg/metadata.json`` content for ``oxe_droid`` in upstream's schema.

    The values are plausible, not DROID's: joint states span 90 % of the Franka limits, joint
    actions (relative to the state) +-0.4 rad, the gripper ``[0, 1]``.
    """
    joint_low = [0.9 * v for v in _JOINT_LOW]
    joint_high = [0.9 * v for v in _JOINT_HIGH]
    height, width = resolution

    def modality(shape: int) -> dict[str, Any]:
        return {'absolute': True, 'rotation_type': None, 'shape': [shape], 'continuous': True}

    return {
        'oxe_droid': {
            'statistics': {
                'state': {
                    'joint_position': _stats(joint_low, joint_high),
                    'gripper_position': _stats([0.0], [1.0]),
                    'cartesian_position': _stats([-1.0] * 6, [1.0] * 6),
                },
                'action': {
                    'joint_position': _stats([-0.4] * 7, [0.4] * 7),
                    'gripper_position': _stats([0.0], [1.0]),
                    'cartesian_position': _stats([-1.0] * 6, [1.0] * 6),
                },
            },
            'modalities': {
                'video': {
                    name: {'resolution': [width, height], 'channels': 3, 'fps': 15.0}
                    for name in DROID_CAMERAS
                },
                'state': {
                    'cartesian_position': modality(6),
                    'gripper_position': modality(1),
                    'joint_position': modality(7),
                },
                'action': {
                    'cartesian_position': modality(6),
                    'gripper_position': modality(1),
                    'joint_position': modality(7),
                },
            },
            'embodiment_tag': 'oxe_droid',
        }
    }


@functools.cache
def _droid_file() -> Embodiment:
    statistics = droid_metadata()['oxe_droid']['statistics']
    return load_embodiment_file(EMBODIMENTS_DIR / 'oxe_droid.yaml', statistics)


def droid_embodiment(
    view_size: tuple[int, int] = (176, 320), resolution: tuple[int, int] = (180, 320)
) -> Embodiment:
    """DROID with the synthetic statistics, its views resized to ``view_size``.

    ``resolution`` is the cameras' dataset resolution (height, width).
    """
    droid = _droid_file()
    cameras = tuple(Camera(camera.key, tuple(resolution)) for camera in droid.cameras)
    return dataclasses.replace(droid, cameras=cameras, view_size=tuple(view_size))


def droid_embodiment_for(frame_seqlen: int) -> Embodiment:
    """:func:`droid_embodiment` at the view size of the preset with ``frame_seqlen`` tokens."""
    if frame_seqlen not in DROID_VIEW_SIZES:
        raise EmbodimentError(
            f'no DROID view size gives {frame_seqlen} tokens per latent frame (presets: '
            f'{sorted(DROID_VIEW_SIZES)}): give the embodiment'
        )
    return droid_embodiment(DROID_VIEW_SIZES[frame_seqlen])


def random_observation(
    seed: int = 0,
    prompt: str = 'pick up the red cup and put it in the sink',
    session_id: str = 'default',
    size: tuple[int, int] = (180, 320),
    frames: int | None = None,
    stamp: float = 0.0,
) -> Observation:
    """A DROID observation with smooth random images and a joint state inside the limits."""
    rng = np.random.default_rng(seed)
    height, width = size
    shape = (height, width, 3) if frames is None else (frames, height, width, 3)
    rows = np.linspace(0, 1, height)[:, None, None]
    cols = np.linspace(0, 1, width)[None, :, None]
    images = {}
    for name in DROID_CAMERAS:
        base = 255 * (
            0.5 + 0.5 * np.sin(6 * rows * rng.uniform(0.5, 2) + 4 * cols + rng.uniform(0, 6, 3))
        )
        noise = rng.normal(0, 8, shape)
        images[name] = np.clip(np.broadcast_to(base, (height, width, 3)) + noise, 0, 255).astype(
            np.uint8
        )
    low, high = np.asarray(_JOINT_LOW), np.asarray(_JOINT_HIGH)
    joints = low + (high - low) * rng.uniform(0.3, 0.7, 7)
    return Observation(
        images=images,
        joint_position=joints,
        gripper_position=np.array([rng.uniform(0, 1)]),
        prompt=prompt,
        stamp=stamp,
        session_id=session_id,
    )
