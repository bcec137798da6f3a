# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Demo observation data: the real DROID camera clips, or a synthetic stand-in.

The clips live outside the project (``../shared/data/droid_videos`` beside the checkout, or the
folder named by ``DREAMZERO_DROID_CLIPS``) and are read at run time, never copied.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from dreamzero_ros.core.robot.panda import PANDA_READY
from dreamzero_ros.policy_types import DROID_ARM_DOF, DROID_CAMERAS

CLIPS_ENV = 'DREAMZERO_DROID_CLIPS'
#: Frame rate of the DROID clips and of the demo stream, Hz.
CLIP_FPS = 15.0
#: Length of the synthetic stand-in when no length is asked for (10 s at 15 Hz).
SYNTHETIC_DEFAULT_FRAMES = 150


def find_clips_dir() -> Path | None:
    """Return the folder holding the three DROID clips, or None where it is absent.

    ``DREAMZERO_DROID_CLIPS``, where set, is the only place looked at.
    """
    if os.environ.get(CLIPS_ENV):
        candidates = [Path(os.environ[CLIPS_ENV])]
    else:
        candidates = [
            Path(__file__).resolve().parents[1].parent / 'shared/data/droid_videos',
            Path.cwd().parent / 'shared/data/droid_videos',
        ]
    for folder in candidates:
        if all((folder / f'{camera}.mp4').is_file() for camera in DROID_CAMERAS):
            return folder
    return None


def load_clips(max_frames: int | None = None, folder: Path | None = None) -> dict[str, np.ndarray]:
    """Decode the DROID clips to ``camera -> (T, H, W, 3)`` uint8 RGB, all cut to one length.

    Raises:
        FileNotFoundError: where no clip folder is found.

    """
    folder = folder or find_clips_dir()
    if folder is None:
        raise FileNotFoundError(
            f'DROID clips not found; set {CLIPS_ENV} to the folder holding '
            + ', '.join(f'{c}.mp4' for c in DROID_CAMERAS)
        )
    import av  # imported here: only the clip reader needs PyAV

    clips = {}
    for camera in DROID_CAMERAS:
        frames = []
        with av.open(str(folder / f'{camera}.mp4')) as container:
            for frame in container.decode(video=0):
                frames.append(frame.to_ndarray(format='rgb24'))
                if max_frames is not None and len(frames) >= max_frames:
                    break
        clips[camera] = np.stack(frames)
    length = min(len(clip) for clip in clips.values())
    return {camera: clip[:length] for camera, clip in clips.items()}


def synthetic_clips(
    num_frames: int, height: int = 180, width: int = 320, seed: int = 0
) -> dict[str, np.ndarray]:
    """Moving coloured gradients standing in for the DROID clips, ``camera -> (T, H, W, 3)``."""
    rng = np.random.default_rng(seed)
    times = np.arange(num_frames, dtype=np.float32)[:, None, None, None] / CLIP_FPS
    rows = np.linspace(0.0, 1.0, height, dtype=np.float32)[None, :, None, None]
    cols = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, None, :, None]
    clips = {}
    for index, camera in enumerate(DROID_CAMERAS):
        phase = rng.uniform(0, 2 * np.pi, size=3).astype(np.float32)
        wave = np.sin(2 * np.pi * (rows * (index + 1) + cols + 0.2 * times) + phase)
        clips[camera] = (127.5 * (wave + 1.0)).astype(np.uint8)
    return clips


def demo_clips(num_frames: int | None = None) -> tuple[dict[str, np.ndarray], str]:
    """Return the real clips if present, else synthetic ones, with a label saying which.

    ``num_frames`` caps the clip length; None takes the whole real clips, or
    :data:`SYNTHETIC_DEFAULT_FRAMES` synthetic frames.
    """
    try:
        return load_clips(max_frames=num_frames), 'DROID clips'
    except FileNotFoundError:
        frames = num_frames or SYNTHETIC_DEFAULT_FRAMES
        return synthetic_clips(frames), 'synthetic frames (DROID clips absent)'


def demo_joint_trajectory(times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A smooth Franka joint trajectory and gripper signal sampled at ``times`` (seconds).

    Returns:
        ``(joint_positions (N, 7), gripper_positions (N, 1))``.

    """
    times = np.asarray(times, dtype=np.float64)[:, None]
    amplitude = np.array([0.3, 0.2, 0.2, 0.25, 0.3, 0.2, 0.4])
    frequency = np.linspace(0.08, 0.2, DROID_ARM_DOF)
    joints = np.array(PANDA_READY) + amplitude * np.sin(2 * np.pi * frequency * times)
    gripper = 0.5 * (1.0 - np.cos(2 * np.pi * 0.1 * times))
    return joints, gripper
