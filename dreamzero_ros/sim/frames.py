# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The scene's coordinate frames as ``/tf`` carries them: each body in its parent body.

A robot's bodies are its URDF links (:mod:`.urdf_model`), so these are the transforms
robot_state_publisher computes from the description and the joint states; the robot's root sits
in ``world``, and so does every free object. A frame whose pose in its parent never changes (a
fixed joint, the robot's root) is static (``/tf_static``); the others move (``/tf``). A camera's
frame, named after it, is its optical frame (REP 103: z forward, x right, y down), fixed to its
body: the ``frame_id`` of its images.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

WORLD = 'world'
_HALF_TURN_X = np.array([0.0, 1.0, 0.0, 0.0])


@dataclass(frozen=True)
class Frame:
    """One transform: ``child`` in ``parent`` (position, quaternion ``w, x, y, z``)."""

    parent: str
    child: str
    position: np.ndarray
    quaternion: np.ndarray


class SceneFrames:
    """Which body frames are static and which move, and their transforms in a state."""

    def __init__(self, model: mujoco.MjModel) -> None:
        self.model = model
        self._static: list[int] = []
        self._moving: list[int] = []
        for body in range(1, model.nbody):
            (self._moving if model.body_jntnum[body] else self._static).append(body)

    def _name(self, body: int) -> str:
        return WORLD if body == 0 else self.model.body(body).name

    def _frame(self, data: mujoco.MjData, body: int) -> Frame:
        parent = int(self.model.body_parentid[body])
        rotation = data.xmat[parent].reshape(3, 3)
        position = rotation.T @ (data.xpos[body] - data.xpos[parent])
        inverse = np.empty(4)
        mujoco.mju_negQuat(inverse, data.xquat[parent])
        quaternion = np.empty(4)
        mujoco.mju_mulQuat(quaternion, inverse, data.xquat[body])
        return Frame(self._name(parent), self._name(body), position, quaternion)

    def static(self, data: mujoco.MjData) -> list[Frame]:
        """The static frames (bodies welded to their parent) and the cameras."""
        frames = [self._frame(data, body) for body in self._static]
        for camera in range(self.model.ncam):
            optical = np.empty(4)  # MuJoCo's camera looks along -z with y up: turn it about x
            mujoco.mju_mulQuat(optical, self.model.cam_quat[camera], _HALF_TURN_X)
            frames.append(
                Frame(
                    self._name(int(self.model.cam_bodyid[camera])),
                    self.model.camera(camera).name,
                    self.model.cam_pos[camera].copy(),
                    optical,
                )
            )
        return frames

    def moving(self, data: mujoco.MjData) -> list[Frame]:
        """The frames that move with a joint, in the state ``data``."""
        return [self._frame(data, body) for body in self._moving]
