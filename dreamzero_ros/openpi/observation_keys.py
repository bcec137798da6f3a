# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The observation key sets of OpenPI requests, to and from Observation.

DROID clients (the DROID main loop, sim-evals) name the exterior cameras
``observation/exterior_image_1_left`` and ``..._2_left``; RoboArena clients count from 0
(``observation/exterior_image_0_left`` and ``..._1_left``). A request holding a ``_0_`` camera is
read as RoboArena, any other as DROID. Images arrive as ``(H, W, 3)`` frames or ``(T, H, W, 3)``
stacks (uint8, or float and channels-first, which are converted as openpi's DROID policy does),
usually shrunk by ``resize_with_pad``; the padding is cropped (where the camera's aspect puts it)
and the content resized to the resolution the policy asks for. A missing prompt is ``""``.

A policy for another robot (its metadata names an embodiment other than ``oxe_droid``) takes
one key per camera, ``observation/<video key>``, and one per state key,
``observation/<state key>`` (:class:`EmbodimentKeys`); its metadata lists them.

Everything DROID-specific of the bridge lives here (keys, cameras, camera aspect).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
import enum
from typing import Any

import numpy as np

from dreamzero_ros.core.observations.image_resize import resize, resize_with_pad
from dreamzero_ros.openpi import images
from dreamzero_ros.policy_types import DROID_ARM_DOF, Observation, ObservationError

JOINT_KEY = 'observation/joint_position'
GRIPPER_KEY = 'observation/gripper_position'
PROMPT_KEY = 'prompt'
WRIST_CAMERA = 'wrist_image_left'
#: Exterior cameras of the policy, in order (the first is exterior 1 in DROID naming).
EXTERIOR_CAMERAS = ('exterior_image_1_left', 'exterior_image_2_left')
#: Largest image side and stack length accepted from a client.
MAX_IMAGE_SIDE = 4096
MAX_FRAMES = 16
#: Longest prompt accepted by default, characters (the text encoder reads 512 tokens).
MAX_PROMPT_CHARS = 4096
#: Aspect ratio (width / height) of the DROID cameras (ZED 2 at 1280x720, as sim-evals' too).
DROID_CAMERA_ASPECT = 16.0 / 9.0


class KeySet(enum.Enum):
    """Which naming of the cameras a request uses."""

    DROID = 'droid'
    ROBOARENA = 'roboarena'
    EMBODIMENT = 'embodiment'

    def camera_keys(self) -> dict[str, str]:
        """Policy camera name -> request key (DROID and RoboArena naming)."""
        first = 1 if self is KeySet.DROID else 0
        keys = {WRIST_CAMERA: f'observation/{WRIST_CAMERA}'}
        for index, camera in enumerate(EXTERIOR_CAMERAS):
            keys[camera] = f'observation/exterior_image_{first + index}_left'
        return keys


def detect_key_set(request: Mapping[str, Any]) -> KeySet:
    """RoboArena if the request names exterior camera 0, else DROID."""
    if 'observation/exterior_image_0_left' in request:
        if 'observation/exterior_image_2_left' in request:
            raise ObservationError(
                'ambiguous cameras: exterior_image_0_left (RoboArena naming) together with '
                'exterior_image_2_left (DROID naming)'
            )
        return KeySet.ROBOARENA
    return KeySet.DROID


def camera_aspect(metadata: Mapping[str, Any]) -> float:
    """Width / height of the policy's cameras before clients shrink them.

    The metadata's ``camera_aspect`` where it has one, else DROID's.
    """
    return float(metadata.get('camera_aspect', DROID_CAMERA_ASPECT))


def required_cameras(metadata: Mapping[str, Any]) -> tuple[str, ...]:
    """Policy camera names a request must carry, from the policy's metadata."""
    cameras = [WRIST_CAMERA] if metadata.get('needs_wrist_camera', True) else []
    count = int(metadata.get('n_external_cameras', len(EXTERIOR_CAMERAS)))
    return (*cameras, *EXTERIOR_CAMERAS[:count])


def _image(key: str, value: Any) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise ObservationError(f'{key}: expected an image array, got {type(value).__name__}')
    try:
        value = images.to_uint8_hwc(value)
    except ValueError as error:
        raise ObservationError(f'{key}: {error}') from error
    if min(value.shape) < 1 or max(value.shape[-3:-1]) > MAX_IMAGE_SIDE:
        raise ObservationError(f'{key}: image size {value.shape} out of range')
    if value.ndim == 4 and value.shape[0] > MAX_FRAMES:
        raise ObservationError(
            f'{key}: at most {MAX_FRAMES} frames per request, got {value.shape[0]}'
        )
    return value


def _vector(key: str, value: Any, size: int) -> np.ndarray:
    if value is None:
        raise ObservationError(f'missing {key!r}')
    if isinstance(value, bool) or not isinstance(
        value, np.ndarray | np.generic | int | float | list
    ):
        raise ObservationError(f'{key}: expected {size} numbers, got {type(value).__name__}')
    if np.size(value) != size:
        raise ObservationError(f'{key}: expected {size} values, got shape {np.shape(value)}')
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ObservationError(f'{key}: expected {size} numbers') from error
    array = array.reshape(size)
    if not np.all(np.isfinite(array)):
        raise ObservationError(f'{key}: values must be finite, got {array}')
    return array


def _prompt(value: Any, max_chars: int) -> str:
    if value is None:
        return ''
    if isinstance(value, bytes):
        value = value.decode('utf-8', errors='replace')
    if not isinstance(value, str):
        raise ObservationError(f'{PROMPT_KEY!r}: expected a str, got {type(value).__name__}')
    if len(value) > max_chars:
        raise ObservationError(
            f'{PROMPT_KEY!r}: {len(value)} characters, more than the {max_chars} accepted'
        )
    return value


def request_to_observation(
    request: Mapping[str, Any],
    cameras: tuple[str, ...],
    image_size: tuple[int, int] | None,
    *,
    source_aspect: float | None = DROID_CAMERA_ASPECT,
    fill_missing_exterior: bool = False,
    max_prompt_chars: int = MAX_PROMPT_CHARS,
    session_id: str = 'default',
    stamp: float = 0.0,
) -> tuple[Observation, KeySet]:
    """Build an :class:`Observation` from an OpenPI request.

    Args:
        request: the decoded request map.
        cameras: policy camera names the request must carry.
        image_size: ``(height, width)`` the policy wants, or None to keep the client's size.
        source_aspect: width / height of the cameras, to find ``resize_with_pad``'s bands
            (:func:`images.remove_padding`); None detects them instead.
        fill_missing_exterior: give a missing exterior camera a black frame (a dropped view,
            which DreamZero saw in training), as long as one exterior camera is present;
            DROID-main and sim-evals clients send a single exterior camera.
        max_prompt_chars: longest prompt accepted.
        session_id: the session the observation belongs to.
        stamp: observation time, seconds.

    Raises:
        ObservationError: on a missing key, a wrong shape or dtype, non-finite state or a
            prompt over ``max_prompt_chars``.

    """
    key_set = detect_key_set(request)
    keys = key_set.camera_keys()
    frames = {}
    dropped = []
    for camera in cameras:
        key = keys[camera]
        if key not in request:
            if fill_missing_exterior and camera in EXTERIOR_CAMERAS:
                dropped.append(camera)
                continue
            raise ObservationError(
                f'missing camera {key!r} ({key_set.value} naming; expected '
                + ', '.join(repr(keys[c]) for c in cameras)
                + ')'
            )
        image = images.remove_padding(_image(key, request[key]), source_aspect)
        if image_size is not None:
            image = resize(image, *image_size)
        frames[camera] = np.ascontiguousarray(image)
    if dropped:
        present = [frames[c] for c in EXTERIOR_CAMERAS if c in frames]
        if not present:
            raise ObservationError(
                'no exterior camera: expected ' + ' or '.join(repr(keys[c]) for c in dropped)
            )
        for camera in dropped:
            frames[camera] = np.zeros_like(present[0])
    prompt = _prompt(request.get(PROMPT_KEY), max_prompt_chars)
    observation = Observation(
        images=frames,
        joint_position=_vector(JOINT_KEY, request.get(JOINT_KEY), DROID_ARM_DOF),
        gripper_position=_vector(GRIPPER_KEY, request.get(GRIPPER_KEY), 1),
        prompt=prompt,
        stamp=stamp,
        session_id=session_id,
    )
    observation.validate(cameras)
    return observation, key_set


def observation_to_request(
    observation: Observation,
    cameras: tuple[str, ...],
    image_size: tuple[int, int] | None,
    key_set: KeySet = KeySet.DROID,
) -> dict[str, Any]:
    """Build an OpenPI request from an :class:`Observation`, as a well-behaved client would.

    Images are shrunk with ``resize_with_pad`` to ``image_size`` (the server metadata's
    ``image_resolution``) where given.
    """
    keys = key_set.camera_keys()
    request: dict[str, Any] = {}
    for camera in cameras:
        if camera not in observation.images:
            raise ObservationError(f'missing camera image {camera!r}')
        image = np.asarray(observation.images[camera])
        if image_size is not None:
            image = resize_with_pad(image, *image_size)
        request[keys[camera]] = np.ascontiguousarray(image)
    request[JOINT_KEY] = np.asarray(observation.joint_position, dtype=np.float64)
    request[GRIPPER_KEY] = np.asarray(observation.gripper_position, dtype=np.float64)
    request[PROMPT_KEY] = observation.prompt
    return request


#: Embodiment tag of DROID policies, served with the DROID and RoboArena key sets.
DROID_TAG = 'oxe_droid'
#: Metadata keys that describe a non-DROID policy's request keys (always sent for one).
EMBODIMENT_METADATA_KEYS = (
    'embodiment',
    'cameras',
    'camera_resolutions',
    'state_keys',
    'state_dims',
    'gripper_state_keys',
    'action_keys',
    'action_dims',
    'arm_dof',
    'gripper_dof',
    'gripper_columns',
    'velocity_columns',
    'action_dim',
    'action_horizon',
    'control_hz',
)


@dataclass(frozen=True)
class EmbodimentKeys:
    """The request keys of a policy for a robot other than DROID.

    Attributes:
        cameras: video keys, in the policy's order; requested as ``observation/<key>``.
        camera_sizes: each camera's ``(height, width)`` before clients shrink it.
        state: ``(key, width, gripper)`` of each state key; requested as ``observation/<key>``.

    """

    cameras: tuple[str, ...]
    camera_sizes: tuple[tuple[int, int], ...]
    state: tuple[tuple[str, int, bool], ...]

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> EmbodimentKeys | None:
        """The keys a policy's metadata describes; None for DROID (or a DROID-only policy)."""
        if metadata.get('embodiment', DROID_TAG) == DROID_TAG:
            return None
        try:
            cameras = tuple(str(c) for c in metadata['cameras'])
            sizes = tuple((int(h), int(w)) for h, w in metadata['camera_resolutions'])
            grippers = set(metadata.get('gripper_state_keys', ()))
            state = tuple(
                (str(key), int(dim), key in grippers)
                for key, dim in zip(metadata['state_keys'], metadata['state_dims'], strict=True)
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(
                f'policy metadata does not describe its request keys: {error}'
            ) from None
        if len(sizes) != len(cameras):
            raise ValueError('policy metadata: camera_resolutions and cameras differ in length')
        return cls(cameras, sizes, state)

    @staticmethod
    def key(name: str) -> str:
        """The request key of a camera or state key."""
        return f'observation/{name}'

    @property
    def arm_dof(self) -> int:
        """Width of the non-gripper state keys together."""
        return sum(dim for _, dim, gripper in self.state if not gripper)

    @property
    def gripper_dof(self) -> int:
        """Width of the gripper state keys together."""
        return sum(dim for _, dim, gripper in self.state if gripper)


def embodiment_request_to_observation(
    request: Mapping[str, Any],
    keys: EmbodimentKeys,
    *,
    detect_padding: bool = False,
    max_prompt_chars: int = MAX_PROMPT_CHARS,
    session_id: str = 'default',
    stamp: float = 0.0,
) -> Observation:
    """Build an :class:`Observation` from a request in a policy's own keys.

    ``resize_with_pad`` bands are cropped where each camera's aspect puts them (or detected with
    ``detect_padding``); the policy letterboxes each camera to its resolution itself.

    Raises:
        ObservationError: on a missing key, a wrong shape or dtype, non-finite state or a
            prompt over ``max_prompt_chars``.

    """
    frames = {}
    for camera, (height, width) in zip(keys.cameras, keys.camera_sizes, strict=True):
        key = keys.key(camera)
        if key not in request:
            expected = ', '.join(repr(keys.key(c)) for c in keys.cameras)
            raise ObservationError(f'missing camera {key!r} (expected {expected})')
        aspect = None if detect_padding else width / height
        frames[camera] = np.ascontiguousarray(
            images.remove_padding(_image(key, request[key]), aspect)
        )
    arm, grippers = [], []
    for name, dim, gripper in keys.state:
        key = keys.key(name)
        (grippers if gripper else arm).append(_vector(key, request.get(key), dim))
    observation = Observation(
        images=frames,
        joint_position=np.concatenate(arm) if arm else np.zeros(0),
        gripper_position=np.concatenate(grippers) if grippers else np.zeros(0),
        prompt=_prompt(request.get(PROMPT_KEY), max_prompt_chars),
        stamp=stamp,
        session_id=session_id,
    )
    observation.validate(keys.cameras, keys.arm_dof, keys.gripper_dof)
    return observation


def embodiment_observation_to_request(
    observation: Observation, keys: EmbodimentKeys, resize: bool = True
) -> dict[str, Any]:
    """Build a request in a policy's own keys from an :class:`Observation`.

    With ``resize``, each camera is shrunk with ``resize_with_pad`` to its resolution.
    """
    observation.validate(keys.cameras, keys.arm_dof, keys.gripper_dof)
    request: dict[str, Any] = {}
    for camera, size in zip(keys.cameras, keys.camera_sizes, strict=True):
        image = np.asarray(observation.images[camera])
        if resize:
            image = resize_with_pad(image, *size)
        request[keys.key(camera)] = np.ascontiguousarray(image)
    taken = {False: 0, True: 0}
    for name, dim, gripper in keys.state:
        source = observation.gripper_position if gripper else observation.joint_position
        start = taken[gripper]
        request[keys.key(name)] = np.asarray(source[start : start + dim], dtype=np.float64)
        taken[gripper] = start + dim
    request[PROMPT_KEY] = observation.prompt
    return request
