# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""DROID observations -> DreamZero model inputs: view stitching, prompt template, frame history.

Upstream's evaluation transform for ``oxe_droid``, reproduced step by step:

1. each view (RGB uint8 at the dataset resolution, 180x320) becomes float ``/ 255``, is
   centre-cropped to ``int(0.95 * size)`` (171x304) and resized bilinearly (antialiased) to the
   per-view size (176x320), then converted back to uint8 by truncation;
2. the views are stitched into one ``2h x 2w`` frame: the wrist view on top, each column repeated
   twice to fill the width; exterior 1 bottom-left, exterior 2 bottom-right;
3. the model sees ``x / 255`` mapped to ``[-1, 1]``.

Frames of another size are first letterboxed to the dataset resolution the way OpenPI clients do
(``resize_with_pad``).  The same torch operations run on the host (:func:`prepare_view`,
:func:`stitch_droid_views`: NumPy in and out) or on any device (:func:`prepare_views`: the
uint8 frames are uploaded and cropped, resized and stitched there).

The instruction is wrapped in the multi-view template the model was trained with; the
unconditional branch uses Wan's negative prompt.  The first call of a session sees one frame per
view, later calls the last four (padded with the oldest frame held).
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812

from dreamzero_ros.errors import ObservationError
from dreamzero_ros.policy_types import DROID_CAMERAS, Observation

__all__ = [
    'FRAMES_AFTER_FIRST_CALL',
    'NEGATIVE_PROMPT',
    'FrameHistory',
    'ViewGeometry',
    'droid_prompt',
    'prepare_view',
    'prepare_view_frames',
    'prepare_views',
    'resize_with_pad',
    'stitch_droid_views',
    'stitch_views',
    'to_model_video',
    'validate_observation',
]

#: Frames per view given to the model on every call after the first of a session.
FRAMES_AFTER_FIRST_CALL = 4

#: Wan's negative prompt, the text of the unconditional CFG branch.
NEGATIVE_PROMPT = (
    'Vibrant colors, overexposed, static, blurry details, text, subtitles, style, artwork, '
    'painting, image, still, grayscale, dull, worst quality, low quality, JPEG artifacts, ugly, '
    'mutilated, extra fingers, bad hands, bad face, deformed, disfigured, mutated limbs, fused '
    'fingers, stagnant image, cluttered background, three legs, many people in the background, '
    'walking backwards.'
)

_DROID_VIEWS_SENTENCE = (
    " The video is split into three views: The top view shows the camera view from the robot's "
    'wrist, the bottom-left view shows the camera view from the left exterior camera, and the '
    'bottom-right view shows the camera view from the right exterior camera. During training, one '
    'of the two bottom exterior views may be a black screen (dropped view). The robot '
)


def droid_prompt(instruction: str) -> str:
    """Wrap a task instruction in the DROID multi-view template, as upstream's collator does.

    Like upstream, an instruction that parses as a Python literal is replaced by its value
    (the first element of a list or tuple) before it is lower-cased.
    """
    text = instruction
    try:
        value = ast.literal_eval(instruction)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    else:
        text = str(value[0]) if isinstance(value, list | tuple) and value else str(value)
    text = text.lower()
    return 'A multi-view video shows that a robot ' + text + _DROID_VIEWS_SENTENCE + text


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

    @property
    def stitched_size(self) -> tuple[int, int]:
        """Size of the stitched three-view frame."""
        return 2 * self.view_size[0], 2 * self.view_size[1]


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


def stitch_views(views: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Stitch prepared ``(T, h, w, 3)`` uint8 views into ``(T, 2h, 2w, 3)`` on their device.

    Top: the wrist view with every column doubled; bottom-left exterior 1, bottom-right exterior 2.
    """
    wrist, exterior_1, exterior_2 = (views[name] for name in DROID_CAMERAS)
    frames, height, width, _ = wrist.shape
    stitched = wrist.new_zeros((frames, 2 * height, 2 * width, 3))
    stitched[:, :height] = wrist.repeat_interleave(2, dim=2)
    stitched[:, height:, :width] = exterior_1
    stitched[:, height:, width:] = exterior_2
    return stitched


def stitch_droid_views(views: Mapping[str, np.ndarray]) -> np.ndarray:
    """:func:`stitch_views` of NumPy views."""
    tensors = {name: torch.from_numpy(np.ascontiguousarray(views[name])) for name in DROID_CAMERAS}
    return stitch_views(tensors).numpy()


def prepare_views(
    clips: Mapping[str, np.ndarray], geometry: ViewGeometry, device: torch.device | str
) -> torch.Tensor:
    """The stitched uint8 ``(T, 2h, 2w, 3)`` frames of the DROID views, computed on ``device``.

    The host uploads each camera's uint8 ``(T, H, W, 3)`` frames; the crop, resize and stitch
    run where they land.
    """
    views = {}
    for name in DROID_CAMERAS:
        frames = torch.from_numpy(np.ascontiguousarray(clips[name])).to(device)
        views[name] = prepare_view_frames(frames, geometry)
    return stitch_views(views)


def to_model_video(
    stitched: np.ndarray | torch.Tensor, device: torch.device | str, dtype: torch.dtype
) -> torch.Tensor:
    """uint8 ``(T, H, W, 3)`` -> ``(1, 3, T, H, W)`` in ``[-1, 1]`` on ``device``."""
    video = torch.as_tensor(stitched).to(device).permute(3, 0, 1, 2).unsqueeze(0)
    return (video.float() / 255.0 - 0.5).div(0.5).to(dtype)


def validate_observation(observation: Observation) -> None:
    """Raise :class:`ObservationError` for anything the engine cannot use."""
    if not isinstance(observation, Observation):
        raise ObservationError(f'expected an Observation, got {type(observation).__name__}')
    observation.validate(DROID_CAMERAS)
    if not isinstance(observation.session_id, str) or not observation.session_id:
        raise ObservationError('session_id must be a non-empty str')


class FrameHistory:
    """The recent frames of each DROID view of one session.

    Holds up to :data:`FRAMES_AFTER_FIRST_CALL` frames per view, which is all that upstream's
    frame selection (the last 4 frames, padded with the oldest buffered frame) can ever read.
    """

    def __init__(self) -> None:
        self._frames: dict[str, deque[np.ndarray]] = {
            name: deque(maxlen=FRAMES_AFTER_FIRST_CALL) for name in DROID_CAMERAS
        }

    def __len__(self) -> int:
        return len(self._frames[DROID_CAMERAS[0]])

    def append(self, images: Mapping[str, np.ndarray]) -> None:
        """Add the frame(s) of one observation, ``(H, W, 3)`` or ``(T, H, W, 3)`` per view.

        A view whose frame size differs from the frames already held is an
        :class:`ObservationError`, raised before anything is added.
        """
        clips = {}
        for name in DROID_CAMERAS:
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
