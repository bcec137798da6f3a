# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Observations -> DreamZero model inputs: view preparation and stitching, frame history.

Upstream's evaluation transform, reproduced step by step for every camera of the embodiment:

1. each view (RGB uint8 at its dataset resolution, DROID: 180x320) becomes float ``/ 255``, is
   centre-cropped to ``int(crop_scale * size)`` (DROID: 171x304) and resized bilinearly
   (antialiased) to the view size (DROID: 176x320), then converted back to uint8 by truncation;
2. the views are stitched into one frame in the embodiment's layout (:mod:`.stitching`);
3. the model sees ``x / 255`` mapped to ``[-1, 1]``.

Frames of another size are first letterboxed to the dataset resolution the way OpenPI clients do
(``resize_with_pad``).  The same torch operations run on the host (:func:`prepare_view`: NumPy
in and out) or on any device (:func:`prepare_views`: the uint8 frames are uploaded and cropped,
resized and stitched there).

The unconditional branch uses Wan's negative prompt.  The first call of a session sees one frame
per view, later calls the last four (padded with the oldest frame held).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812

from dreamzero_ros.engine.embodiment import Camera, Embodiment
from dreamzero_ros.engine.pipeline.stitching import stitch
from dreamzero_ros.errors import ObservationError
from dreamzero_ros.policy_types import Observation

__all__ = [
    'FRAMES_AFTER_FIRST_CALL',
    'FrameHistory',
    'ViewGeometry',
    'prepare_view',
    'prepare_view_frames',
    'prepare_views',
    'resize_with_pad',
    'to_model_video',
    'validate_observation',
]

#: Frames per view given to the model on every call after the first of a session.
FRAMES_AFTER_FIRST_CALL = 4


@dataclass(frozen=True)
class ViewGeometry:
    """Per-view preprocessing sizes, ``(height, width)``.

    Attributes:
        source_size: the dataset resolution the crop is defined on (DROID: 180x320).
        view_size: the size of one view after the crop and resize (DROID: 176x320).
        crop_scale: centre-crop fraction of ``source_size``.

    """

    source_size: tuple[int, int] = (180, 320)
    view_size: tuple[int, int] = (176, 320)
    crop_scale: float = 0.95

    @property
    def crop_size(self) -> tuple[int, int]:
        """Centre-crop size in pixels, ``int(scale * size)`` as upstream computes it."""
        return (
            int(self.source_size[0] * self.crop_scale),
            int(self.source_size[1] * self.crop_scale),
        )

    @classmethod
    def of(cls, embodiment: Embodiment, camera: Camera) -> ViewGeometry:
        """The geometry of one camera of ``embodiment``."""
        return cls(camera.source_size, embodiment.view_size, embodiment.crop_scale)


def _resize(images: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Bilinear, antialiased resize of float ``(N, C, H, W)`` images."""
    return F.interpolate(images, size=size, mode='bilinear', align_corners=False, antialias=True)


def resize_with_pad(frames: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Letterbox float ``(N, C, H, W)`` frames into ``size`` keeping the aspect ratio.

    Same geometry as ``openpi_client.image_tools.resize_with_pad`` (zero padding, centred).
    """
    height, width = frames.shape[-2:]
    if (height, width) == tuple(size):
        return frames
    ratio = max(width / size[1], height / size[0])
    new_height, new_width = max(1, int(height / ratio)), max(1, int(width / ratio))
    resized = _resize(frames, (new_height, new_width))
    top = max(0, int((size[0] - new_height) / 2))
    left = max(0, int((size[1] - new_width) / 2))
    out = frames.new_zeros((*frames.shape[:-2], *size))
    out[..., top : top + new_height, left : left + new_width] = resized
    return out


def prepare_view_frames(frames: torch.Tensor, geometry: ViewGeometry) -> torch.Tensor:
    """One camera's uint8 ``(T, H, W, 3)`` frames -> uint8 ``(T, *view_size, 3)``, same device.

    float32 ``/ 255``, letterbox, centre crop, antialiased bilinear resize, ``* 255``, clamp and
    truncation to uint8, as upstream.  Devices may round the resize differently: where a value
    lands within float32 rounding of an integer, a GPU can truncate it to the neighbouring one.
    """
    images = frames.permute(0, 3, 1, 2).float() / 255.0
    images = resize_with_pad(images, geometry.source_size)
    crop_h, crop_w = geometry.crop_size
    top = int(round((geometry.source_size[0] - crop_h) / 2.0))
    left = int(round((geometry.source_size[1] - crop_w) / 2.0))
    images = images[..., top : top + crop_h, left : left + crop_w]
    images = _resize(images, geometry.view_size)
    images = (images * 255).clamp(0, 255).to(torch.uint8)
    return images.permute(0, 2, 3, 1)


def prepare_view(frames: np.ndarray, geometry: ViewGeometry) -> np.ndarray:
    """One camera's uint8 ``(T, H, W, 3)`` frames -> uint8 ``(T, *view_size, 3)``."""
    return prepare_view_frames(torch.from_numpy(np.ascontiguousarray(frames)), geometry).numpy()


def prepare_views(
    clips: Mapping[str, np.ndarray], embodiment: Embodiment, device: torch.device | str
) -> torch.Tensor:
    """The stitched uint8 ``(T, H, W, 3)`` frames of the embodiment's views, computed on ``device``.

    The host uploads each camera's uint8 ``(T, H, W, 3)`` frames; the crop, resize and stitch
    run where they land.
    """
    views = []
    for camera in embodiment.cameras:
        frames = torch.from_numpy(np.ascontiguousarray(clips[camera.key])).to(device)
        views.append(prepare_view_frames(frames, ViewGeometry.of(embodiment, camera)))
    return stitch(views, embodiment.layout)


def to_model_video(
    stitched: np.ndarray | torch.Tensor, device: torch.device | str, dtype: torch.dtype
) -> torch.Tensor:
    """uint8 ``(T, H, W, 3)`` -> ``(1, 3, T, H, W)`` in ``[-1, 1]`` on ``device``."""
    video = torch.as_tensor(stitched).to(device).permute(3, 0, 1, 2).unsqueeze(0)
    return (video.float() / 255.0 - 0.5).div(0.5).to(dtype)


def validate_observation(observation: Observation, embodiment: Embodiment) -> None:
    """Raise :class:`ObservationError` for anything the engine cannot use."""
    if not isinstance(observation, Observation):
        raise ObservationError(f'expected an Observation, got {type(observation).__name__}')
    observation.validate(
        embodiment.camera_keys, embodiment.arm_state_dim, embodiment.gripper_state_dim
    )
    if not isinstance(observation.session_id, str) or not observation.session_id:
        raise ObservationError('session_id must be a non-empty str')


class FrameHistory:
    """The recent frames of each camera of one session.

    Holds up to :data:`FRAMES_AFTER_FIRST_CALL` frames per view, which is all that upstream's
    frame selection (the last 4 frames, padded with the oldest buffered frame) can ever read.
    """

    def __init__(self, cameras: tuple[str, ...]) -> None:
        if not cameras:
            raise ValueError('a frame history needs at least one camera')
        self._frames: dict[str, deque[np.ndarray]] = {
            name: deque(maxlen=FRAMES_AFTER_FIRST_CALL) for name in cameras
        }

    def __len__(self) -> int:
        return len(next(iter(self._frames.values())))

    def append(self, images: Mapping[str, np.ndarray]) -> None:
        """Add the frame(s) of one observation, ``(H, W, 3)`` or ``(T, H, W, 3)`` per view.

        A view whose frame size differs from the frames already held is an
        :class:`ObservationError`, raised before anything is added.
        """
        clips = {}
        for name in self._frames:
            image = images[name]
            clips[name] = image[None] if image.ndim == 3 else image
            held = self._frames[name]
            if held and held[-1].shape != clips[name].shape[1:]:
                raise ObservationError(
                    f'camera {name!r}: frame size {clips[name].shape[1:]} differs from the '
                    f"session's {held[-1].shape}; reset the session to change resolution"
                )
        for name, clip in clips.items():
            self._frames[name].extend(np.array(frame, copy=True) for frame in clip)

    def select(self, num_frames: int) -> dict[str, np.ndarray]:
        """The last ``num_frames`` frames per view, oldest first, ``(T, H, W, 3)``."""
        selected = {}
        for name, frames in self._frames.items():
            if not frames:
                raise ObservationError(f'no frames received for camera {name!r}')
            chosen = list(frames)[-num_frames:]
            selected[name] = np.stack([frames[0]] * (num_frames - len(chosen)) + chosen)
        return selected
