# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""End-to-end tiny engine: shapes, determinism, timings, video, settings, threads, errors."""

import dataclasses
import threading

import numpy as np
import pytest

from dreamzero_ros.engine import DreamZeroEngine, EngineConfig
from dreamzero_ros.engine.checkpoint.synthetic_droid import droid_embodiment, random_observation
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.engine.step_cache import StepCacheConfig
from dreamzero_ros.errors import EmbodimentError
from dreamzero_ros.policy_types import Policy, PolicyError

CONFIG = EngineConfig.tiny(options=EngineOptions(device='cpu', dtype='float32'))


@pytest.fixture(scope='module')
def engine():
    return DreamZeroEngine.from_config(CONFIG, seed=0)


def test_infer_returns_absolute_joint_actions(engine):
    observation = random_observation(seed=3, stamp=12.5, session_id='shape')
    chunk = engine.infer(observation)
    assert chunk.actions.shape == (24, 8) and chunk.actions.dtype == np.float32
    assert np.all(np.isfinite(chunk.actions))
    assert chunk.stamp == 12.5 and chunk.chunk_id == 0
    assert chunk.step_duration == pytest.approx(1 / 15)
    assert set(chunk.timing_ms) == {'inputs', 'encode', 'prefill', 'denoise', 'decode', 'total'}
    assert chunk.timing_ms['total'] >= chunk.timing_ms['denoise'] > 0
    assert chunk.video is None
    # Joints are the state plus a de-normalised delta: the statistics' deltas span +-0.4 rad
    # and random weights drive the normalised output to a few units at most.
    deltas = chunk.actions[:, :7] - observation.joint_position[None].astype(np.float32)
    assert np.abs(deltas).max() < 0.4 * 10
    assert engine.infer(dataclasses.replace(observation, stamp=13.0)).chunk_id == 1


def test_same_seed_same_actions_other_seed_other_actions(engine):
    observation = random_observation(seed=4, session_id='det')
    twin = DreamZeroEngine.from_config(CONFIG, seed=0)
    other = DreamZeroEngine.from_config(CONFIG, seed=1)
    first = engine.infer(observation).actions
    np.testing.assert_array_equal(twin.infer(observation).actions, first)
    assert not np.allclose(other.infer(observation).actions, first)
    noise = DreamZeroEngine.from_config(
        CONFIG.replace(sampling=dataclasses.replace(CONFIG.sampling, seed=99)), seed=0
    )
    assert not np.allclose(noise.infer(observation).actions, first)


def test_engine_is_a_policy_with_droid_metadata(engine):
    assert isinstance(engine, Policy)
    meta = engine.metadata
    assert meta['image_resolution'] == (180, 320)
    assert meta['n_external_cameras'] == 2 and meta['needs_wrist_camera'] is True
    assert meta['needs_stereo_camera'] is False and meta['needs_session_id'] is True
    assert meta['action_space'] == 'joint_position'
    assert meta['action_horizon'] == 24 and meta['control_hz'] == 15.0
    assert meta['embodiment'] == 'oxe_droid' and meta['action_dim'] == 8
    assert meta['cameras'] == ['exterior_image_1_left', 'exterior_image_2_left', 'wrist_image_left']
    assert (meta['arm_dof'], meta['gripper_dof'], meta['gripper_columns']) == (7, 1, [7])


def test_predicted_video_is_decoded_on_request(engine):
    engine.reset('video')
    first = engine.infer(random_observation(seed=5, session_id='video'), return_video=True)
    # First chunk of a window: the conditioning latent + 2 predicted latents -> 1 + 4 + 4 frames.
    assert first.video.shape == (9, 32, 64, 3) and first.video.dtype == np.uint8
    second = engine.infer(random_observation(seed=6, session_id='video'), return_video=True)
    assert second.video.shape == (5, 32, 64, 3)


def test_clips_and_other_resolutions_are_accepted(engine):
    engine.infer(random_observation(seed=7, session_id='clip', frames=3))
    chunk = engine.infer(random_observation(seed=8, session_id='clip', frames=2))
    assert chunk.chunk_id == 1
    big = random_observation(seed=9, session_id='big', size=(480, 640))
    assert np.all(np.isfinite(engine.infer(big).actions))


@pytest.mark.parametrize(
    ('sampling', 'step_cache'),
    [
        ({'cfg_scale': 1.0}, 'static'),
        ({}, 'full'),
        ({}, 'dynamic'),
        ({'step_cache_tuning': StepCacheConfig(dit_steps=5)}, 'static'),
    ],
)
def test_sampling_settings(engine, sampling, step_cache):
    observation = random_observation(seed=10, session_id='settings')
    variant = DreamZeroEngine.from_config(
        CONFIG.replace(
            sampling=dataclasses.replace(CONFIG.sampling, **sampling),
            options=dataclasses.replace(CONFIG.options, step_cache=step_cache),
        ),
        seed=0,
    )
    actions = variant.infer(observation).actions
    assert actions.shape == (24, 8) and np.all(np.isfinite(actions))
    engine.reset('settings')
    reference = engine.infer(observation).actions
    if (sampling, step_cache) != ({}, 'dynamic'):
        assert not np.array_equal(actions, reference)


def test_prompt_encodings_are_cached(engine):
    engine.infer(random_observation(seed=11, session_id='cache', prompt='wipe the table'))
    cached = dict(engine._prompts)
    engine.infer(random_observation(seed=12, session_id='cache', prompt='wipe the table'))
    assert any(engine._prompts[k] is v for k, v in cached.items())
    small = DreamZeroEngine.from_config(CONFIG.replace(max_cached_prompts=1), seed=0)
    for prompt in ('a', 'b', 'c'):
        small.infer(random_observation(seed=1, session_id=prompt, prompt=prompt))
    assert len(small._prompts) == 1


def test_concurrent_calls_are_serialised(engine):
    observations = {
        name: [random_observation(seed=20 + i, session_id=name) for i in range(2)]
        for name in ('t1', 't2')
    }
    sequential = DreamZeroEngine.from_config(CONFIG, seed=0)
    expected = {
        name: [sequential.infer(o).actions for o in obs] for name, obs in observations.items()
    }
    results: dict[str, list[np.ndarray]] = {}
    errors = []

    def run(name):
        try:
            results[name] = [engine.infer(o).actions for o in observations[name]]
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(name,)) for name in observations]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for name in observations:
        for got, want in zip(results[name], expected[name], strict=True):
            np.testing.assert_array_equal(got, want)


def test_model_failures_become_policy_errors_and_reset_the_session(engine, monkeypatch):
    engine.infer(random_observation(seed=30, session_id='fail'))

    def broken(*args, **kwargs):
        raise RuntimeError('device lost')

    monkeypatch.setattr(engine.denoiser, 'denoise_chunk', broken)
    with pytest.raises(PolicyError, match='device lost'):
        engine.infer(random_observation(seed=31, session_id='fail'))
    monkeypatch.undo()
    assert 'fail' not in engine.sessions
    assert engine.infer(random_observation(seed=31, session_id='fail')).chunk_id == 0


def test_an_embodiment_that_does_not_fit_the_model_is_refused():
    two_views = droid_embodiment((16, 48))  # three 16x48 views: 12 tokens per frame, not 8
    with pytest.raises(EmbodimentError, match='give 12 tokens per latent frame'):
        DreamZeroEngine.from_config(CONFIG, embodiment=two_views)
