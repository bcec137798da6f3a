# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""View crop/resize/stitch, DROID's prompt template, frame history and observation errors."""

import numpy as np
import pytest
import torch

from dreamzero_ros.engine.checkpoint.synthetic_droid import droid_embodiment
from dreamzero_ros.engine.config import NEGATIVE_PROMPT
from dreamzero_ros.engine.pipeline.model_inputs import (
    FrameHistory,
    ViewGeometry,
    prepare_view,
    to_model_video,
    validate_observation,
)
from dreamzero_ros.engine.pipeline.stitching import stitch
from dreamzero_ros.policy_types import DROID_CAMERAS, Observation, ObservationError

DROID = droid_embodiment()


def _coordinate_image(height, width):
    """R = row, G = column (mod 256), B = 7."""
    rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing='ij')
    return np.stack([rows % 256, cols % 256, np.full_like(rows, 7)], -1).astype(np.uint8)[None]


def test_published_geometry():
    geometry = ViewGeometry()
    assert geometry.crop_size == (171, 304)
    assert ViewGeometry.of(DROID, DROID.cameras[0]) == geometry
    assert DROID.stitched_size == (352, 640)


def test_centre_crop_offsets_match_torchvision_rounding():
    # With view_size == crop_size the resize is the identity, exposing the crop window.
    geometry = ViewGeometry(source_size=(180, 320), view_size=(171, 304))
    out = prepare_view(_coordinate_image(180, 320), geometry)
    assert out.shape == (1, 171, 304, 3)
    # (180 - 171) / 2 = 4.5 rounds half-to-even to 4; (320 - 304) / 2 = 8.
    assert out[0, 0, 0, 0] == 4 and out[0, 0, 0, 1] == 8
    assert out[0, -1, -1, 0] == 4 + 170 and out[0, -1, -1, 1] == (8 + 303) % 256


def test_resize_to_176x320_keeps_constant_images_and_truncates():
    frames = np.full((2, 180, 320, 3), 200, dtype=np.uint8)
    out = prepare_view(frames, ViewGeometry())
    assert out.shape == (2, 176, 320, 3) and out.dtype == np.uint8
    # 200 / 255 * 255 lands a hair below 200 in float32 and truncates like upstream's .to(uint8).
    assert set(np.unique(out)) <= {199, 200}


def test_other_sizes_are_letterboxed_first():
    frames = np.full((1, 360, 360, 3), 255, dtype=np.uint8)  # square: padded left and right
    out = prepare_view(frames, ViewGeometry(view_size=(171, 304)))
    assert out[0, 85, 0].max() == 0  # black padding at the left edge
    assert out[0, 85, 152].min() >= 254  # image in the middle


def test_stitch_layout():
    h, w = 4, 6
    wrist = np.arange(w, dtype=np.uint8)[None, None, :, None].repeat(h, 1).repeat(3, 3)
    views = {
        'wrist_image_left': wrist,
        'exterior_image_1_left': np.full((1, h, w, 3), 100, np.uint8),
        'exterior_image_2_left': np.full((1, h, w, 3), 200, np.uint8),
    }
    droid = droid_embodiment()
    out = stitch([torch.from_numpy(views[key]) for key in droid.camera_keys], droid.layout).numpy()
    assert out.shape == (1, 2 * h, 2 * w, 3)
    # Every wrist column appears twice, side by side (nearest 2x upscaling in width).
    np.testing.assert_array_equal(out[0, :h, 0::2], wrist[0])
    np.testing.assert_array_equal(out[0, :h, 1::2], wrist[0])
    assert np.all(out[0, h:, :w] == 100) and np.all(out[0, h:, w:] == 200)


def test_model_video_range_and_layout():
    stitched = np.zeros((3, 8, 10, 3), np.uint8)
    stitched[1] = 255
    video = to_model_video(stitched, 'cpu', torch.float32)
    assert video.shape == (1, 3, 3, 8, 10)
    assert video[0, :, 0].eq(-1).all() and video[0, :, 1].eq(1).all()


def test_droid_prompt_template():
    droid_prompt = droid_embodiment().prompt
    text = droid_prompt('Put the Marker in the bowl.')
    assert text.startswith('A multi-view video shows that a robot put the marker in the bowl.')
    assert "The top view shows the camera view from the robot's wrist" in text
    assert text.endswith('The robot put the marker in the bowl.')
    # Literal-looking instructions are unwrapped like upstream's ast.literal_eval step.
    assert droid_prompt("['Open the drawer', 'x']") == droid_prompt('open the drawer')
    assert NEGATIVE_PROMPT.startswith('Vibrant colors, overexposed')


def test_frame_history_first_one_then_last_four_padded_with_oldest():
    history = FrameHistory(DROID_CAMERAS)

    def images(value, frames=None):
        shape = (2, 2, 3) if frames is None else (frames, 2, 2, 3)
        return {name: np.full(shape, value, np.uint8) for name in DROID_CAMERAS}

    history.append(images(1))
    assert history.select(1)['wrist_image_left'][:, 0, 0, 0].tolist() == [1]
    history.append(images(2))
    assert history.select(4)['wrist_image_left'][:, 0, 0, 0].tolist() == [1, 1, 1, 2]
    clip = images(0, frames=3)
    for name in DROID_CAMERAS:
        clip[name][:, 0, 0, 0] = [3, 4, 5]
    history.append(clip)
    assert history.select(4)['exterior_image_2_left'][:, 0, 0, 0].tolist() == [2, 3, 4, 5]
    assert len(history) == 4


def test_frame_history_copies_frames():
    history = FrameHistory(DROID_CAMERAS)
    frame = {name: np.zeros((2, 2, 3), np.uint8) for name in DROID_CAMERAS}
    history.append(frame)
    frame['wrist_image_left'][:] = 9
    assert history.select(1)['wrist_image_left'].max() == 0


def _observation(**overrides):
    fields = dict(
        images={name: np.zeros((180, 320, 3), np.uint8) for name in DROID_CAMERAS},
        joint_position=np.zeros(7),
        gripper_position=np.zeros(1),
        prompt='pick',
    )
    fields.update(overrides)
    return Observation(**fields)


def test_observation_errors():
    validate_observation(_observation(), DROID)
    images = {name: np.zeros((180, 320, 3), np.uint8) for name in DROID_CAMERAS[:2]}
    with pytest.raises(ObservationError, match='exterior_image_2_left'):
        validate_observation(_observation(images=images), DROID)
    images = {name: np.zeros((180, 320, 3), np.float32) for name in DROID_CAMERAS}
    with pytest.raises(ObservationError, match='uint8'):
        validate_observation(_observation(images=images), DROID)
    images = {name: np.zeros((180, 320), np.uint8) for name in DROID_CAMERAS}
    with pytest.raises(ObservationError, match='shape'):
        validate_observation(_observation(images=images), DROID)
    with pytest.raises(ObservationError, match='finite'):
        validate_observation(_observation(joint_position=np.full(7, np.nan)), DROID)
    with pytest.raises(ObservationError, match='session_id'):
        validate_observation(_observation(session_id=''), DROID)
    with pytest.raises(ObservationError, match='Observation'):
        validate_observation({'images': {}}, DROID)


def test_frame_history_refuses_a_size_change_without_changing():
    history = FrameHistory(DROID_CAMERAS)
    history.append({name: np.zeros((4, 6, 3), np.uint8) for name in DROID_CAMERAS})
    bigger = {name: np.ones((8, 12, 3), np.uint8) for name in DROID_CAMERAS}
    with pytest.raises(ObservationError, match='differs from the session'):
        history.append(bigger)
    assert len(history) == 1 and history.select(1)['wrist_image_left'].shape == (1, 4, 6, 3)
