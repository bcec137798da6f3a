# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""OpenPI requests <-> Observation: DROID/RoboArena keys, resize_with_pad and its undoing."""

from __future__ import annotations

import subprocess

import numpy as np
from openpi_support import openpi_python
import pytest

from dreamzero_ros.core.observations import image_resize
from dreamzero_ros.openpi import images, observation_keys
from dreamzero_ros.openpi.observation_keys import KeySet
from dreamzero_ros.policy_types import DROID_CAMERAS, Observation, ObservationError

CAMERAS = DROID_CAMERAS
SIZE = (180, 320)


def _scene(height: int, width: int, seed: int, frames: int | None = None) -> np.ndarray:
    """A textured image without black lines (as a real camera gives)."""
    rng = np.random.default_rng(seed)
    shape = (height, width, 3) if frames is None else (frames, height, width, 3)
    return rng.integers(20, 236, shape, dtype=np.uint8)


def _droid_request(**images_by_key) -> dict:
    request = {
        'observation/wrist_image_left': _scene(180, 320, 0),
        'observation/exterior_image_1_left': _scene(180, 320, 1),
        'observation/exterior_image_2_left': _scene(180, 320, 2),
        'observation/joint_position': np.linspace(-1, 1, 7).astype(np.float32),
        'observation/gripper_position': np.array([0.5], dtype=np.float32),
        'prompt': 'stack the cups',
    }
    request.update(images_by_key)
    return request


def test_droid_request_maps_cameras_and_state():
    request = _droid_request()
    observation, key_set = observation_keys.request_to_observation(
        request, CAMERAS, SIZE, session_id='s', stamp=2.5
    )
    assert key_set is KeySet.DROID
    for camera in CAMERAS:
        np.testing.assert_array_equal(observation.images[camera], request[f'observation/{camera}'])
    assert observation.joint_position.dtype == np.float64
    np.testing.assert_allclose(observation.joint_position, np.linspace(-1, 1, 7), atol=1e-6)
    assert observation.gripper_position.shape == (1,)
    assert (observation.prompt, observation.session_id, observation.stamp) == (
        'stack the cups',
        's',
        2.5,
    )


def test_roboarena_request_counts_exterior_cameras_from_zero():
    exterior_0, exterior_1 = _scene(180, 320, 5, frames=4), _scene(180, 320, 6, frames=4)
    request = _droid_request(
        **{
            'observation/exterior_image_0_left': exterior_0,
            'observation/exterior_image_1_left': exterior_1,
            'observation/wrist_image_left': _scene(180, 320, 7, frames=4),
        }
    )
    del request['observation/exterior_image_2_left']
    observation, key_set = observation_keys.request_to_observation(request, CAMERAS, SIZE)
    assert key_set is KeySet.ROBOARENA
    np.testing.assert_array_equal(observation.images['exterior_image_1_left'], exterior_0)
    np.testing.assert_array_equal(observation.images['exterior_image_2_left'], exterior_1)
    assert observation.images['wrist_image_left'].shape == (4, 180, 320, 3)


def test_padded_224_images_are_cropped_and_resized_to_the_policy_size():
    camera = _scene(720, 1280, 3)
    padded = image_resize.resize_with_pad(camera, 224, 224)
    request = _droid_request(**{'observation/exterior_image_1_left': padded})
    observation, _ = observation_keys.request_to_observation(request, CAMERAS, SIZE)
    image = observation.images['exterior_image_1_left']
    assert image.shape == (180, 320, 3)
    # No black band survives, and the content matches the camera view shrunk directly.
    assert image[:3].mean() > 15 and image[-3:].mean() > 15
    direct = image_resize.resize(image_resize.resize(camera, 126, 224), 180, 320)
    assert np.abs(image.astype(int) - direct.astype(int)).mean() < 1.0


@pytest.mark.parametrize(
    ('change', 'message'),
    [
        ({'observation/wrist_image_left': None}, "missing camera 'observation/wrist_image_left'"),
        (
            {'observation/exterior_image_0_left': _scene(180, 320, 0)},
            'ambiguous cameras',
        ),
        (
            {'observation/wrist_image_left': np.full((180, 320, 3), 300, np.int16)},
            r'outside \[0, 255\]',
        ),
        (
            {'observation/wrist_image_left': np.full((180, 320, 3), np.nan, np.float32)},
            'non-finite',
        ),
        (
            {'observation/wrist_image_left': np.zeros((180, 320, 3), np.complex64)},
            'expected uint8, float or integer pixels',
        ),
        ({'observation/wrist_image_left': np.zeros((180, 320), np.uint8)}, 'expected shape'),
        ({'observation/wrist_image_left': np.zeros((0, 320, 3), np.uint8)}, 'out of range'),
        ({'observation/wrist_image_left': np.zeros((20, 8, 8, 3), np.uint8)}, 'at most 16'),
        ({'observation/wrist_image_left': 'not an image'}, 'expected an image array'),
        ({'observation/joint_position': np.zeros(6)}, 'expected 7 values'),
        ({'observation/joint_position': np.array([np.nan] * 7)}, 'must be finite'),
        ({'observation/joint_position': None}, "missing 'observation/joint_position'"),
        ({'observation/joint_position': 'abc'}, 'expected 7 numbers'),
        ({'observation/gripper_position': np.zeros(2)}, 'expected 1 values'),
        ({'prompt': 5}, "'prompt': expected a str"),
        ({'prompt': 'x' * 4097}, "'prompt': 4097 characters, more than the 4096 accepted"),
    ],
)
def test_bad_requests_raise_observation_errors(change, message):
    request = _droid_request()
    for key, value in change.items():
        if value is None:
            request.pop(key)
        else:
            request[key] = value
    with pytest.raises(ObservationError, match=message):
        observation_keys.request_to_observation(request, CAMERAS, SIZE)


def test_a_missing_prompt_is_empty_as_upstream_and_openpi_have_it():
    request = _droid_request()
    del request['prompt']
    observation, _ = observation_keys.request_to_observation(request, CAMERAS, SIZE)
    assert observation.prompt == ''
    request['prompt'] = b'raw bytes'
    observation, _ = observation_keys.request_to_observation(request, CAMERAS, SIZE)
    assert observation.prompt == 'raw bytes'


# openpi's DroidInputs image parsing (policies/droid_policy.py), its einops
# "c h w -> h w c" written as a transpose; run with the reference client's numpy.
OPENPI_PARSE_IMAGE = """
import sys, numpy as np
def _parse_image(image):
    image = np.asarray(image)
    if np.issubdtype(image.dtype, np.floating):
        image = (255 * image).astype(np.uint8)
    if image.shape[0] == 3:
        image = image.transpose(1, 2, 0)
    return image
inputs = np.load(sys.argv[1])
np.savez(sys.argv[2], **{name: _parse_image(inputs[name]) for name in inputs.files})
"""


def test_float_and_channels_first_images_are_converted_as_openpi_does(tmp_path):
    rng = np.random.default_rng(3)
    scene = rng.integers(0, 256, (180, 320, 3), dtype=np.uint8)
    inputs = {
        'float_hwc': scene.astype(np.float32) / 255.0,
        'uint8_chw': scene.transpose(2, 0, 1).copy(),
        'float_chw': (scene.astype(np.float64) / 255.0).transpose(2, 0, 1).copy(),
    }
    np.savez(tmp_path / 'in.npz', **inputs)
    subprocess.run(
        [
            openpi_python(),
            '-c',
            OPENPI_PARSE_IMAGE,
            str(tmp_path / 'in.npz'),
            str(tmp_path / 'out.npz'),
        ],
        check=True,
        timeout=60,
        env={'PYTHONPATH': ''},
    )
    reference = np.load(tmp_path / 'out.npz')
    for name, image in inputs.items():
        request = _droid_request(**{'observation/wrist_image_left': image})
        observation, _ = observation_keys.request_to_observation(request, CAMERAS, SIZE)
        np.testing.assert_array_equal(observation.images['wrist_image_left'], reference[name])
    stack = np.stack([inputs['float_chw']] * 2)  # (T, 3, H, W)
    request = _droid_request(**{'observation/wrist_image_left': stack})
    observation, _ = observation_keys.request_to_observation(request, CAMERAS, SIZE)
    np.testing.assert_array_equal(observation.images['wrist_image_left'][1], reference['float_chw'])


def test_padding_follows_the_camera_aspect_by_default():
    camera = _scene(720, 1280, 4)
    camera[:80] = 0  # the scene's own top rows are black: detection would take them for padding
    padded = image_resize.resize_with_pad(camera, 224, 224)
    request = _droid_request(**{'observation/exterior_image_1_left': padded})
    observation, _ = observation_keys.request_to_observation(request, CAMERAS, SIZE)
    direct = image_resize.resize(image_resize.resize(camera, 126, 224), 180, 320)
    exterior = observation.images['exterior_image_1_left']
    assert np.abs(exterior.astype(int) - direct.astype(int)).mean() < 1.0
    # An unpadded frame of the policy's own aspect keeps its black edge rows.
    unpadded = _scene(180, 320, 5)
    unpadded[:10] = unpadded[-10:] = 0
    request = _droid_request(**{'observation/exterior_image_1_left': unpadded})
    observation, _ = observation_keys.request_to_observation(request, CAMERAS, SIZE)
    np.testing.assert_array_equal(observation.images['exterior_image_1_left'], unpadded)
    assert observation_keys.camera_aspect({}) == 16 / 9
    assert observation_keys.camera_aspect({'camera_aspect': 4 / 3}) == 4 / 3


def test_a_missing_exterior_camera_becomes_a_dropped_black_view_when_allowed():
    request = _droid_request()
    del request['observation/exterior_image_2_left']
    with pytest.raises(ObservationError, match="missing camera 'observation/exterior_image_2"):
        observation_keys.request_to_observation(request, CAMERAS, SIZE)
    observation, _ = observation_keys.request_to_observation(
        request, CAMERAS, SIZE, fill_missing_exterior=True
    )
    assert observation.images['exterior_image_2_left'].shape == (180, 320, 3)
    assert not observation.images['exterior_image_2_left'].any()
    np.testing.assert_array_equal(
        observation.images['exterior_image_1_left'], request['observation/exterior_image_1_left']
    )
    del request['observation/exterior_image_1_left']
    with pytest.raises(ObservationError, match='no exterior camera'):
        observation_keys.request_to_observation(request, CAMERAS, SIZE, fill_missing_exterior=True)
    request = _droid_request()
    del request['observation/wrist_image_left']
    with pytest.raises(ObservationError, match='wrist_image_left'):
        observation_keys.request_to_observation(request, CAMERAS, SIZE, fill_missing_exterior=True)


def test_scalar_gripper_and_row_joint_vectors_are_accepted():
    request = _droid_request(
        **{'observation/gripper_position': 0.25, 'observation/joint_position': np.zeros((1, 7))}
    )
    observation, _ = observation_keys.request_to_observation(request, CAMERAS, SIZE)
    assert observation.gripper_position.tolist() == [0.25]
    assert observation.joint_position.shape == (7,)


def test_observation_to_request_round_trips():
    observation = Observation(
        images={camera: _scene(720, 1280, i) for i, camera in enumerate(CAMERAS)},
        joint_position=np.arange(7.0),
        gripper_position=np.array([1.0]),
        prompt='open the drawer',
    )
    request = observation_keys.observation_to_request(observation, CAMERAS, SIZE)
    assert request['observation/exterior_image_2_left'].shape == (180, 320, 3)
    back, key_set = observation_keys.request_to_observation(request, CAMERAS, SIZE)
    assert key_set is KeySet.DROID
    np.testing.assert_array_equal(back.joint_position, observation.joint_position)
    assert back.prompt == 'open the drawer'


def test_required_cameras_follow_the_metadata():
    assert observation_keys.required_cameras({}) == (
        'wrist_image_left',
        'exterior_image_1_left',
        'exterior_image_2_left',
    )
    assert observation_keys.required_cameras(
        {'n_external_cameras': 1, 'needs_wrist_camera': False}
    ) == ('exterior_image_1_left',)


SOURCES = [(720, 1280), (180, 320), (480, 640), (300, 200)]
TARGETS = [(224, 224), (180, 320)]


def test_resize_with_pad_matches_openpi_client(tmp_path):
    inputs = {f'{h}x{w}': _scene(h, w, h + w) for h, w in SOURCES}
    np.savez(tmp_path / 'inputs.npz', **inputs)
    code = (
        'import sys, numpy as np\n'
        'from openpi_client import image_tools\n'
        'inputs = np.load(sys.argv[1])\n'
        'out = {f"{k}-{h}x{w}": image_tools.resize_with_pad(inputs[k], h, w)\n'
        f'       for k in inputs.files for h, w in {TARGETS!r}}}\n'
        'np.savez(sys.argv[2], **out)\n'
    )
    subprocess.run(
        [openpi_python(), '-c', code, str(tmp_path / 'inputs.npz'), str(tmp_path / 'out.npz')],
        check=True,
        timeout=60,
        env={'PYTHONPATH': ''},
    )
    reference = np.load(tmp_path / 'out.npz')
    for name, image in inputs.items():
        for height, width in TARGETS:
            expected = reference[f'{name}-{height}x{width}']
            ours = image_resize.resize_with_pad(image, height, width)
            assert ours.shape == expected.shape
            # Same padding geometry, nearly the same pixels.
            np.testing.assert_array_equal(ours.any(axis=-1), expected.any(axis=-1))
            assert np.abs(ours.astype(int) - expected.astype(int)).mean() < 1.0
            # Undoing the padding recovers the content box, with or without the aspect.
            top, left, content_h, content_w = image_resize.pad_geometry(
                *image.shape[:2], height, width
            )
            for aspect in (None, image.shape[1] / image.shape[0]):
                cropped = images.remove_padding(expected, aspect)
                assert cropped.shape[:2] == (content_h, content_w), (name, height, width, aspect)


def test_remove_padding_keeps_images_without_bands():
    dark_top = _scene(224, 224, 1)
    dark_top[:40] = 0  # a dark region at one edge only is scene content, not padding
    np.testing.assert_array_equal(images.remove_padding(dark_top), dark_top)
    # A stretched (not padded) image has no bands for the camera's aspect either.
    stretched = image_resize.resize(_scene(720, 1280, 2), 224, 224)
    assert images.remove_padding(stretched, 16 / 9).shape == (224, 224, 3)
    black = np.zeros((224, 224, 3), np.uint8)
    assert images.remove_padding(black).shape == (224, 224, 3)


def test_remove_padding_with_aspect_ignores_dark_edges_of_the_content():
    camera = _scene(720, 1280, 4)
    camera[:60] = 0  # dark top edge of the scene itself
    padded = image_resize.resize_with_pad(camera, 224, 224)
    assert images.remove_padding(padded, 16 / 9).shape == (126, 224, 3)


def test_detected_padding_follows_the_resize_geometry_not_dark_content():
    # A 720p scene whose rows 0-39 are black, letterboxed to 224x224 by a client: the bands are
    # resize_with_pad's 49 + 49 rows for 16:9; the scene's own black rows stay in the content.
    camera = _scene(720, 1280, 6)
    camera[:40] = 0
    padded = image_resize.resize_with_pad(camera, 224, 224)
    assert int(np.argmax(padded.any(axis=(1, 2)))) > 49  # dark rows run on past the band
    detected = images.remove_padding(padded)
    np.testing.assert_array_equal(detected, images.remove_padding(padded, 16 / 9))
    assert detected.shape == (126, 224, 3)
    np.testing.assert_array_equal(detected, padded[49:175])
    # A 180x320 frame with 3 black rows top and bottom is no resize_with_pad geometry.
    framed = _scene(180, 320, 7)
    framed[:3] = framed[-3:] = 0
    np.testing.assert_array_equal(images.remove_padding(framed), framed)
    # Bands of the right geometry that are nearly, not exactly, the fill value are content.
    dim = image_resize.resize_with_pad(_scene(720, 1280, 8), 224, 224)
    dim[:49] = dim[-49:] = 1
    np.testing.assert_array_equal(images.remove_padding(dim), dim)
    dim[:49, :, 2] = 0
    dim[-49:, :, 2] = 0  # one channel at 0 is not the canvas either
    np.testing.assert_array_equal(images.remove_padding(dim), dim)
    # A stack is padded only where every frame has the band.
    stack = np.stack([image_resize.resize_with_pad(_scene(480, 640, 9), 224, 224)] * 2)
    assert images.remove_padding(stack).shape == (2, 168, 224, 3)
    stack[1, 5, 5] = 9
    np.testing.assert_array_equal(images.remove_padding(stack), stack)


def test_detect_mode_of_a_request_keeps_dark_scene_rows():
    camera = _scene(720, 1280, 10)
    camera[:40] = 0
    padded = image_resize.resize_with_pad(camera, 224, 224)
    request = _droid_request(**{'observation/exterior_image_1_left': padded})
    detected, _ = observation_keys.request_to_observation(
        request, CAMERAS, SIZE, source_aspect=None
    )
    known, _ = observation_keys.request_to_observation(request, CAMERAS, SIZE)
    np.testing.assert_array_equal(
        detected.images['exterior_image_1_left'], known.images['exterior_image_1_left']
    )


def test_resize_of_stacks_matches_frame_by_frame():
    stack = _scene(90, 160, 9, frames=3)
    resized = image_resize.resize(stack, 180, 320)
    for index in range(3):
        np.testing.assert_array_equal(resized[index], image_resize.resize(stack[index], 180, 320))
