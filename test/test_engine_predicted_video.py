# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The engine keeps a chunk's predicted latents and model input on request, decoded later."""

import numpy as np
import pytest
import torch

from dreamzero_ros.engine import DreamZeroEngine, EngineConfig
from dreamzero_ros.engine.checkpoint.synthetic_droid import random_observation
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.engine.pipeline.model_inputs import prepare_views
from dreamzero_ros.engine.pipeline.predicted_video import unstitch
from dreamzero_ros.engine.pipeline.stitching import stitch

CONFIG = EngineConfig.tiny(options=EngineOptions(device='cpu', dtype='float32'))


@pytest.fixture(scope='module')
def engines():
    return DreamZeroEngine.from_config(CONFIG, seed=0), DreamZeroEngine.from_config(CONFIG, seed=0)


def test_nothing_is_kept_unless_asked(engines):
    engine, _ = engines
    chunk = engine.infer(random_observation(seed=1, session_id='plain'))
    assert chunk.views is None and chunk.video is None


def test_kept_latents_decode_to_the_future_frames_of_return_video(engines):
    engine, twin = engines
    observation = random_observation(seed=2, session_id='keep')
    kept = engine.infer(observation, predicted_video=True, model_input=True)
    reference = twin.infer(observation, return_video=True)
    np.testing.assert_array_equal(kept.actions, reference.actions)
    frames = kept.views.decode_predicted()
    # 2 predicted latents -> 8 frames; the window's first chunk decodes after the conditioning
    # latent exactly as return_video does, minus that frame.
    assert frames.shape == (8, 32, 64, 3) and frames.dtype == np.uint8
    assert np.abs(frames.astype(int) - reference.video[1:].astype(int)).max() <= 1
    views = kept.views.per_camera(frames)
    assert list(views) == list(engine.embodiment.camera_keys)
    assert all(v.shape == (8, 16, 32, 3) for v in views.values())
    # a continuing chunk gives as many frames
    later = engine.infer(random_observation(seed=3, session_id='keep'), predicted_video=True)
    assert later.views.decode_predicted().shape == (8, 32, 64, 3)
    assert not later.views.has_model_input


def test_model_input_is_the_stitched_frame_the_model_saw(engines):
    engine, _ = engines
    observation = random_observation(seed=4, session_id='input')
    chunk = engine.infer(observation, model_input=True)
    assert not chunk.views.has_predicted_video
    expected = prepare_views(
        {k: v[None] for k, v in observation.images.items()}, engine.embodiment, 'cpu'
    )[-1].numpy()
    np.testing.assert_array_equal(chunk.views.model_input_frame(), expected)
    with pytest.raises(ValueError, match='not kept'):
        chunk.views.decode_predicted()


def test_actions_do_not_depend_on_keeping_the_views(engines):
    engine, twin = engines
    observation = random_observation(seed=5, session_id='same')
    a = engine.infer(observation, predicted_video=True, model_input=True).actions
    b = twin.infer(observation).actions
    np.testing.assert_allclose(a, b, atol=1e-6)


@pytest.mark.parametrize(
    ('layout', 'count'), [('droid', 3), ('grid', 2), ('grid', 3), ('single', 1)]
)
def test_unstitch_inverts_stitch(layout, count):
    generator = torch.Generator().manual_seed(count)
    views = [torch.randint(0, 256, (2, 4, 6, 3), dtype=torch.uint8, generator=generator)]
    views += [torch.randint(0, 256, (2, 4, 6, 3), dtype=torch.uint8) for _ in range(count - 1)]
    parts = unstitch(stitch(views, layout).numpy(), layout, count)
    for part, view in zip(parts, views, strict=True):
        np.testing.assert_array_equal(part, view.numpy())
    with pytest.raises(ValueError, match='takes'):
        unstitch(stitch(views, layout).numpy(), layout, 4)


def test_a_stoppable_decode_gives_the_same_frames_or_gives_up_between_latents(engines):
    engine, twin = engines
    observation = random_observation(seed=6, session_id='stop')
    kept = engine.infer(observation, predicted_video=True)
    other = twin.infer(observation, predicted_video=True)
    asked = []

    def stop_at_second():
        asked.append(True)
        return len(asked) >= 2

    assert kept.views.decode_predicted(stop=stop_at_second) is None  # gave up after 1 latent
    assert len(asked) == 2
    whole = other.views.decode_predicted()
    stepwise = kept.views.decode_predicted(stop=lambda: False)  # started again, latent by latent
    assert np.abs(stepwise.astype(int) - whole.astype(int)).max() <= 1
    assert kept.views.decode_predicted(stop=lambda: True) is stepwise  # decoded once
