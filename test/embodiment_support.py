# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Embodiments for tests: DROID from its shipped file, and robots unlike DROID."""

import dataclasses
from pathlib import Path

import numpy as np

from dreamzero_ros.engine.checkpoint.experiment_cfg import (
    KNOWN_PROMPT_TEMPLATES,
    load_embodiment_file,
)
from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint
from dreamzero_ros.engine.checkpoint.synthetic_droid import droid_metadata
from dreamzero_ros.engine.config import EngineConfig
from dreamzero_ros.engine.embodiment import (
    EMBODIMENTS_DIR,
    Camera,
    Embodiment,
    KeyStatistics,
    ModalityKey,
)
from dreamzero_ros.policy_types import Observation

DROID_FILE = EMBODIMENTS_DIR / 'oxe_droid.yaml'

#: The prompt template of :func:`ur_embodiment` (a tag upstream has none for).
UR_TEMPLATE = 'A video from a front and a wrist camera of a UR arm that {instruction}'
#: A UR-style arm: 6 joints (rad) within +-2*pi.
UR_JOINT_LIMIT = 2 * np.pi


def statistics(low, high) -> KeyStatistics:
    """Every statistic upstream writes, from a q01/q99 range."""
    low, high = np.asarray(low, float), np.asarray(high, float)
    return KeyStatistics(
        {
            'min': low - 0.1,
            'max': high + 0.1,
            'mean': (low + high) / 2,
            'std': (high - low) / 4,
            'q01': low,
            'q99': high,
        }
    )


def droid_embodiment() -> Embodiment:
    """DROID from the packaged ``embodiments/oxe_droid.yaml`` with the test DROID statistics."""
    return load_embodiment_file(DROID_FILE, droid_metadata()['oxe_droid']['statistics'])


def ur_embodiment(
    view_size=(16, 48), layout: str = 'grid', tag: str = 'ur5e_lab', cameras: int = 2
) -> Embodiment:
    """6 joints + gripper, two cameras in a grid, absolute actions, another frame size."""
    joints = statistics([-0.8 * UR_JOINT_LIMIT] * 6, [0.8 * UR_JOINT_LIMIT] * 6)
    gripper = statistics([0.0], [0.085])
    names = ('front', 'wrist', 'top')[:cameras]
    return Embodiment(
        tag=tag,
        cameras=tuple(Camera(name, (24, 64)) for name in names),
        view_size=view_size,
        crop_scale=0.9,
        layout=layout,
        state=(
            ModalityKey('arm_joints', 6, 'q99', joints),
            ModalityKey('gripper_width', 1, 'min_max', gripper, gripper=True),
        ),
        action=(
            ModalityKey('arm_joints', 6, 'q99', joints),
            ModalityKey('gripper_width', 1, 'min_max', gripper, gripper=True),
        ),
        prompt_template=UR_TEMPLATE,
        control_hz=10.0,
    )


def yam_embodiment() -> Embodiment:
    """Upstream's bimanual YAM layout: two arms with grippers, relative actions, three views."""
    arm, grip = statistics([-2.0] * 6, [2.0] * 6), statistics([0.0], [1.0])
    delta = statistics([-0.2] * 6, [0.2] * 6)
    state, action = [], []
    for side in ('left', 'right'):
        state += [
            ModalityKey(f'{side}_joint_pos', 6, 'q99', arm),
            ModalityKey(f'{side}_gripper_pos', 1, 'q99', grip, gripper=True),
        ]
        action += [
            ModalityKey(f'{side}_joint_pos', 6, 'q99', delta, relative=True),
            ModalityKey(f'{side}_gripper_pos', 1, 'q99', grip, gripper=True),
        ]
    return Embodiment(
        tag='yam',
        cameras=tuple(
            Camera(f'{name}_camera-images-rgb', (180, 320)) for name in ('top', 'left', 'right')
        ),
        view_size=(176, 320),
        crop_scale=0.95,
        layout='grid',
        state=tuple(state),
        action=tuple(action),
        prompt_template=KNOWN_PROMPT_TEMPLATES['yam'],
        control_hz=30.0,
    )


def tiny_config(frame_seqlen: int) -> EngineConfig:
    """The tiny preset with another number of tokens per latent frame."""
    tiny = EngineConfig.tiny()
    return tiny.replace(dit=dataclasses.replace(tiny.dit, frame_seqlen=frame_seqlen))


def write_ur_checkpoint(folder: Path, seed: int = 4) -> Path:
    """A random tiny checkpoint of :func:`ur_embodiment` (12 tokens per latent frame)."""
    return write_random_checkpoint(folder, tiny_config(12), seed=seed, embodiment=ur_embodiment())


def ur_observation(seed: int = 0, **changes) -> Observation:
    """An observation of :func:`ur_embodiment`: front and wrist frames, 6 joints, a gripper."""
    rng = np.random.default_rng(seed)
    fields = dict(
        images={
            name: rng.integers(0, 255, (24, 64, 3), dtype=np.uint8) for name in ('front', 'wrist')
        },
        joint_position=rng.uniform(-1, 1, 6),
        gripper_position=np.array([0.04]),
        prompt='stack the blocks',
        session_id='ur',
    )
    fields.update(changes)
    return Observation(**fields)


def shipped_embodiment(tag: str, view_size=(16, 48), camera_size=(24, 64)) -> Embodiment:
    """A shipped embodiment file (``embodiments/<tag>.yaml``) at test image sizes.

    Statistics are made up per key: states within +-1 (grippers 0..1), relative actions
    within +-0.1, other actions (a base velocity) within +-0.3.
    """
    from dreamzero_ros.engine.checkpoint.data_files import read_yaml
    from dreamzero_ros.errors import EmbodimentError

    data = dict(read_yaml(EMBODIMENTS_DIR / f'{tag}.yaml', EmbodimentError))
    grippers = {'gripper', 'effector'}

    def stats(entry, group):
        dim = entry['dim']
        if group == 'action' and entry.get('relative'):
            low, high = -0.1, 0.1
        elif group == 'action' and entry.get('velocity'):
            low, high = -0.3, 0.3
        elif any(part in entry['key'] for part in grippers):
            low, high = 0.0, 1.0
        else:
            low, high = -1.0, 1.0
        return statistics([low] * dim, [high] * dim).to_mapping()

    data['statistics'] = {
        group: {entry['key']: stats(entry, group) for entry in data[group]}
        for group in ('state', 'action')
    }
    data['cameras'] = [
        {**camera, 'height': camera_size[0], 'width': camera_size[1]} for camera in data['cameras']
    ]
    data['view'] = {**data['view'], 'height': view_size[0], 'width': view_size[1]}
    return Embodiment.from_mapping(data, tag)


def write_shipped_checkpoint(folder: Path, tag: str, seed: int = 5) -> Path:
    """A random tiny checkpoint of :func:`shipped_embodiment` (12 tokens per latent frame)."""
    return write_random_checkpoint(
        folder, tiny_config(12), seed=seed, embodiment=shipped_embodiment(tag)
    )
