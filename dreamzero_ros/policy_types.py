# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The ROS-free contract between observation sources, policies and action consumers.

Every policy (the local DreamZero engine, a remote OpenPI server) implements :class:`Policy`;
every front end (the ROS node, the OpenPI bridge, rosbag replay) builds :class:`Observation`
objects and consumes :class:`ActionChunk` objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

# The errors of the Policy contract (defined with every other error in dreamzero_ros.errors).
from dreamzero_ros.errors import ObservationError as ObservationError
from dreamzero_ros.errors import PolicyError as PolicyError

#: DROID camera names, in the order DreamZero stitches them (wrist first).
DROID_CAMERAS: tuple[str, ...] = (
    'wrist_image_left',
    'exterior_image_1_left',
    'exterior_image_2_left',
)
#: Number of arm joints in the DROID (Franka) state and action.
DROID_ARM_DOF = 7
#: Action row layout: 7 absolute joint positions followed by the gripper position.
DROID_ACTION_DIM = DROID_ARM_DOF + 1
#: DROID control rate, Hz; one action row per control step.
DROID_CONTROL_HZ = 15.0


@dataclass(frozen=True)
class Observation:
    """One synchronised observation of the robot.

    Attributes:
        images: camera name -> RGB uint8 image ``(H, W, 3)``, or a short clip ``(T, H, W, 3)``
            of the most recent frames, oldest first.
        joint_position: arm joint positions (the policy's non-gripper state keys, in its
            order), radians; DROID: ``(7,)``.
        gripper_position: gripper positions (the policy's gripper state keys); DROID: closure
            in ``[0, 1]`` (0 = open, 1 = closed), ``(1,)``.
        prompt: natural-language task instruction.
        stamp: time of the observation in seconds (ROS time of the newest sensor message).
        session_id: episode identifier; per-session model state is keyed by it.

    """

    images: Mapping[str, np.ndarray]
    joint_position: np.ndarray
    gripper_position: np.ndarray
    prompt: str
    stamp: float = 0.0
    session_id: str = 'default'

    def validate(
        self,
        cameras: tuple[str, ...] = DROID_CAMERAS,
        arm_dof: int = DROID_ARM_DOF,
        gripper_dof: int = 1,
    ) -> None:
        """Raise :class:`ObservationError` if this observation cannot be given to a policy.

        ``cameras``, ``arm_dof`` and ``gripper_dof`` are what the policy reads (DROID's by
        default).
        """
        for name in cameras:
            if name not in self.images:
                raise ObservationError(f'missing camera image {name!r}')
            image = self.images[name]
            if not isinstance(image, np.ndarray) or image.dtype != np.uint8:
                raise ObservationError(
                    f'camera {name!r}: expected a uint8 ndarray, got '
                    f'{getattr(image, "dtype", type(image).__name__)}'
                )
            if image.ndim not in (3, 4) or image.shape[-1] != 3:
                raise ObservationError(
                    f'camera {name!r}: expected shape (H, W, 3) or (T, H, W, 3), got {image.shape}'
                )
            if min(image.shape[-3:-1]) < 1:
                raise ObservationError(f'camera {name!r}: empty image {image.shape}')
        for label, value, size in (
            ('joint_position', self.joint_position, arm_dof),
            ('gripper_position', self.gripper_position, gripper_dof),
        ):
            array = np.asarray(value)
            if array.shape != (size,):
                raise ObservationError(f'{label}: expected shape ({size},), got {array.shape}')
            if not np.issubdtype(array.dtype, np.number) or not np.all(np.isfinite(array)):
                raise ObservationError(f'{label}: values must be finite numbers, got {array}')
        if not isinstance(self.prompt, str):
            raise ObservationError(f'prompt must be a str, got {type(self.prompt).__name__}')


@dataclass(frozen=True)
class ActionChunk:
    """A chunk of future actions predicted from one observation.

    Attributes:
        actions: ``(H, action_dim)`` float32 in the policy's action key order (DROID: 7
            absolute joint positions then the gripper), one row per control step; row ``k`` is
            the command for time ``stamp + k * step_duration``.
        stamp: the :attr:`Observation.stamp` this chunk answers.
        step_duration: seconds between consecutive rows.
        chunk_id: per-session counter, starting at 0 after a reset.
        timing_ms: stage name -> milliseconds (``inputs``, ``encode``, ``prefill``, ``denoise``,
            ``decode``, ``total`` for the local engine).
        video: optional predicted future frames ``(T, H, W, 3)`` uint8.
        views: optional undecoded predicted video and model input, decoded on request
            (the local engine's :class:`~dreamzero_ros.engine.pipeline.predicted_video.ChunkViews`).

    """

    actions: np.ndarray
    stamp: float
    step_duration: float = 1.0 / DROID_CONTROL_HZ
    chunk_id: int = 0
    timing_ms: Mapping[str, float] = field(default_factory=dict)
    video: np.ndarray | None = None
    views: Any = None

    @property
    def horizon(self) -> int:
        """Number of action rows."""
        return int(self.actions.shape[0])


@runtime_checkable
class Policy(Protocol):
    """Anything that turns observations into action chunks."""

    @property
    def metadata(self) -> Mapping[str, Any]:
        """Static facts about the policy (cameras, image resolution, action space, horizon)."""
        ...

    def infer(self, observation: Observation) -> ActionChunk:
        """Predict the next action chunk; raises :class:`PolicyError` on bad input."""
        ...

    def reset(self, session_id: str = 'default') -> None:
        """Forget the state of one session (frame history, K/V caches, chunk counter)."""
        ...
