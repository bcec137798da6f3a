# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Camera views cropped, resized and stitched with torch on the engine's device, as with NumPy."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F  # noqa: N812

from dreamzero_ros.engine import DreamZeroEngine, EngineConfig
from dreamzero_ros.engine.checkpoint.synthetic_droid import droid_embodiment, random_observation
from dreamzero_ros.engine.pipeline.model_inputs import (
    ViewGeometry,
    prepare_view,
    prepare_views,
    resize_with_pad,
    to_model_video,
)
from dreamzero_ros.engine.pipeline.stitching import stitch
from dreamzero_ros.policy_types import DROID_CAMERAS


def _numpy_path(clips, geometry):
    """The previous host path, verbatim in its operations: per-view torch, NumPy stitch, upload."""
    views = {}
    for name in DROID_CAMERAS:
        images = torch.from_numpy(np.ascontiguousarray(clips[name])).permute(0, 3, 1, 2)
        images = images.float() / 255.0
        if images.shape[-2:] != geometry.source_size:
            images = resize_with_pad(images, geometry.source_size)
        crop_h, crop_w = geometry.crop_size
        top = int(round((geometry.source_size[0] - crop_h) / 2.0))
        left = int(round((geometry.source_size[1] - crop_w) / 2.0))
        images = images[..., top : top + crop_h, left : left + crop_w]
        images = F.interpolate(
            images, size=geometry.view_size, mode='bilinear', align_corners=False, antialias=True
        )
        views[name] = (images * 255).clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy()
    wrist, exterior_1, exterior_2 = (views[name] for name in DROID_CAMERAS)
    frames, height, width, _ = wrist.shape
    stitched = np.zeros((frames, 2 * height, 2 * width, 3), dtype=np.uint8)
    stitched[:, :height] = np.repeat(wrist, 2, axis=2)
    stitched[:, height:, :width] = exterior_1
    stitched[:, height:, width:] = exterior_2
    video = torch.from_numpy(stitched).permute(3, 0, 1, 2).unsqueeze(0)
    return stitched, (video.float() / 255.0 - 0.5).div(0.5)


def _clip_sets():
    flat = np.full((4, 180, 320, 3), 200, np.uint8)  # lands a hair below 200 before truncation
    square = np.random.default_rng(1).integers(0, 256, (1, 240, 240, 3), dtype=np.uint8)
    yield random_observation(seed=3, frames=4).images
    yield random_observation(seed=4).images  # one frame per view, (H, W, 3)
    yield dict.fromkeys(DROID_CAMERAS, flat)
    yield {**random_observation(seed=5, frames=1).images, 'wrist_image_left': square}


@pytest.mark.parametrize('view_size', [(176, 320), (16, 32)])
def test_views_prepared_with_torch_equal_the_numpy_path(view_size):
    droid = droid_embodiment(view_size)
    geometry = ViewGeometry(view_size=view_size)
    for clips in _clip_sets():
        clips = {k: v if v.ndim == 4 else v[None] for k, v in clips.items()}
        stitched, video = _numpy_path(clips, geometry)
        on_torch = prepare_views(clips, droid, 'cpu')
        assert on_torch.dtype == torch.uint8 and on_torch.device.type == 'cpu'
        np.testing.assert_array_equal(on_torch.numpy(), stitched)  # bit for bit
        assert torch.equal(to_model_video(on_torch, 'cpu', torch.float32), video)
        # The NumPy helpers other modules use are the same operations.
        views = [torch.from_numpy(prepare_view(clips[k], geometry)) for k in droid.camera_keys]
        np.testing.assert_array_equal(stitch(views, droid.layout).numpy(), stitched)


def test_engine_reports_the_input_preparation_time():
    engine = DreamZeroEngine.from_config(EngineConfig.tiny(), seed=0)
    chunk = engine.infer(random_observation(seed=0, size=(180, 320)))
    timing = chunk.timing_ms
    assert timing['inputs'] > 0
    assert timing['total'] >= timing['inputs'] + timing['encode'] + timing['denoise']
