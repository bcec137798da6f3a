# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Second round of engine speed options: each gives the reference path's results (float32, tiny).

* the last DiT call of a chunk runs the conditional CFG branch only when the video is not
  requested (batched CFG and CFG parallel);
* broadcast AdaLN modulation when a call's timesteps are uniform;
* keys/values written into the K/V cache from inside the compiled block stage;
* the VAE encoder with more frames per pass and ``channels_last_3d`` activations.
"""

import dataclasses

from dit_support import run_call
import numpy as np
import pytest
from test_engine_cfg_parallel import run_group, scenario
import torch
from torch._dynamo.utils import counters

from dreamzero_ros.engine import ConfigError, DreamZeroEngine, EngineConfig, fast_blocks
from dreamzero_ros.engine.checkpoint import randomize_
from dreamzero_ros.engine.denoise import ChunkDenoiser, ChunkInputs, DenoiseConfig
from dreamzero_ros.engine.dit import CausalWanDiT, DiTConfig
from dreamzero_ros.engine.fast_blocks import AccelerationConfig, FastBlockRunner
from dreamzero_ros.engine.random_checkpoint import write_random_checkpoint
from dreamzero_ros.engine.step_cache import StepCacheConfig, StepSchedule
from dreamzero_ros.engine.synthetic_droid import random_observation
from dreamzero_ros.engine.vae import VAEConfig, WanVAE

H, W = 4, 6
T = (H // 2) * (W // 2)
#: Every similarity test passes: DiT on steps 0, 1, 6 and 11 only.
DYNAMIC_MIN = StepCacheConfig(mode='dynamic', thresholds=(-2.0,), countdowns=(4,))
#: No similarity test passes: DiT on all 16 steps.
DYNAMIC_NEVER = StepCacheConfig(mode='dynamic', thresholds=(2.0,), countdowns=(4,))


@pytest.fixture(scope='module')
def dit():
    config = dataclasses.replace(DiTConfig.tiny(), frame_seqlen=T)
    return randomize_(CausalWanDiT(config), 0).eval()


def chunk_stream(count: int, need_video: bool, seed: int = 0) -> list[ChunkInputs]:
    """A window's first chunk and continuing chunks (a new window every 4), batch 1."""
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g)

    text, negative = r(1, 512, 64), r(1, 512, 64)
    chunks = []
    for index in range(count):
        new = index % 4 == 0
        chunks.append(
            ChunkInputs(
                prompt_embeds=text,
                negative_prompt_embeds=negative,
                context_latents=r(1, 16, 1 if new else 2, H, W),
                state=r(1, 64),
                new_window=new,
                clip_tokens=r(1, 257, 32) if new else None,
                y=r(1, 20, 9, H, W) if new else None,
                need_video=need_video,
            )
        )
    return chunks


def run_chunks(dit, config: DenoiseConfig, chunks: list[ChunkInputs], rows: list | None = None):
    """Outputs of the chunks on a fresh session; ``rows`` collects each DiT call's batch."""
    denoiser = ChunkDenoiser(dit, config)
    session = denoiser.open_session()
    forward = dit.forward
    if rows is not None:

        def counting(latents, *args, **kwargs):
            rows.append(latents.shape[0])
            return forward(latents, *args, **kwargs)

        dit.forward = counting
    try:
        return [denoiser.denoise_chunk(session, chunk) for chunk in chunks]
    finally:
        if rows is not None:
            del dit.forward


# ---------------------------------------------------------------- 1. last call conditional only


@pytest.mark.parametrize(
    ('step_cache', 'calls', 'last'),
    [
        (StepCacheConfig(), 8, 15),
        (StepCacheConfig(mode='static', dit_steps=5), 5, 12),
        (StepCacheConfig(mode='full'), 16, 15),
        (DYNAMIC_NEVER, 16, 15),
        (DYNAMIC_MIN, 4, None),  # step 11's combined velocity feeds the test at step 12
    ],
)
def test_last_dit_step_is_known_where_the_schedule_allows(step_cache, calls, last):
    schedule = StepSchedule(step_cache, 16)
    ran = []
    for i in range(16):
        if schedule.should_run(i):
            ran.append(i)
            schedule.record(torch.ones(1, 4))  # identical velocities: similarity 1
    assert len(ran) == calls
    known = [i for i in ran if StepSchedule(step_cache, 16).is_last_dit_step(i)]
    assert known == ([] if last is None else [last])


@pytest.mark.parametrize('step_cache', [StepCacheConfig(), DYNAMIC_NEVER, DYNAMIC_MIN])
def test_last_call_without_video_runs_the_conditional_rows_only(dit, step_cache):
    config = DenoiseConfig(step_cache=step_cache)
    full_rows, skip_rows = [], []
    full = run_chunks(dit, config, chunk_stream(5, need_video=True), full_rows)
    skipped = run_chunks(dit, config, chunk_stream(5, need_video=False), skip_rows)
    calls = full[0].dit_calls
    assert all(o.dit_calls == calls for o in full + skipped)
    # 5 prefills (new window, then continuing) of 2 rows, the denoising calls of 2 rows ...
    assert full_rows == ([2] * calls) * 5
    known = step_cache.mode == 'static' or step_cache == DYNAMIC_NEVER
    if known:
        assert skip_rows == ([2] * (calls - 1) + [1]) * 5  # ... but the last: conditional only
    else:
        assert skip_rows == full_rows  # the dynamic cache's last call is not known in advance
    assert [o.conditional_only_calls for o in full + skipped] == [0] * 5 + [int(known)] * 5
    for a, b in zip(full, skipped, strict=True):
        assert b.video_latents is None and a.video_latents is not None
        assert a.start_frame == b.start_frame
        torch.testing.assert_close(b.actions, a.actions, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(full[0].actions, full[1].actions)


def test_the_skip_can_be_switched_off(dit):
    config = DenoiseConfig(skip_final_uncond=False)
    rows = []
    outputs = run_chunks(dit, config, chunk_stream(2, need_video=False), rows)
    assert rows == [2] * 16 and all(o.video_latents is None for o in outputs)


def test_without_cfg_nothing_changes(dit):
    config = DenoiseConfig(cfg_scale=1.0)
    a = run_chunks(dit, config, chunk_stream(2, need_video=True))
    rows = []
    b = run_chunks(dit, config, chunk_stream(2, need_video=False), rows)
    assert rows == [1] * 16
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x.actions, y.actions)


def test_engine_actions_are_those_of_the_full_last_call():
    skip = DreamZeroEngine.from_config(EngineConfig.tiny(dtype='float32'), seed=3)
    full = DreamZeroEngine(
        EngineConfig.tiny(dtype='float32', skip_final_uncond=False),
        skip.modules,
        skip.tokenizer,
        skip.normalizer,
    )
    for step in range(5):
        observation = random_observation(seed=step, session_id='s', stamp=step / 15)
        a, b = skip.infer(observation), full.infer(observation)
        np.testing.assert_allclose(a.actions, b.actions, rtol=1e-5, atol=1e-5)
        assert a.video is None and b.video is None
    # Asking for the video runs the whole last call and decodes it.
    observation = random_observation(seed=9, session_id='s', stamp=1.0)
    assert skip.infer(observation, return_video=True).video is not None


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    return write_random_checkpoint(tmp_path_factory.mktemp('ckpt'), 'tiny', seed=3, dtype='float32')


def test_cfg_parallel_skips_the_exchange_of_the_last_call(tmp_path, checkpoint):
    # Rank 0 runs the last call alone (no all_gather; rank 1 idles): the actions equal those of
    # a one-process run that computes both branches on every call.
    result, codes, outputs = run_group(tmp_path, checkpoint, ['--checkpoint', str(checkpoint)])
    assert 'error' not in result, result.get('tb')
    assert codes == [0], outputs
    full = DreamZeroEngine.from_pretrained(checkpoint, dtype='float32', skip_final_uncond=False)
    reference = scenario(full)
    for got, want in zip(result['actions'], reference, strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)
    assert not np.allclose(reference[0], reference[1])


# ---------------------------------------------------------------- 2 + 3. fast block runner


def call_inputs(dit, mixed: bool = False, seed: int = 1):
    """A prefill and one denoising call (batch 2), timesteps expanded (uniform) or mixed."""
    c = dit.config
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g)

    if mixed:
        timestep = torch.tensor([[733, 500], [733, 500]])
        timestep_action = torch.arange(c.num_action_per_block).repeat(2, 1) * 30
    else:
        timestep = torch.tensor(733).expand(2, 2)
        timestep_action = torch.tensor(600).expand(2, c.num_action_per_block)
    return {
        'context': dit.prepare_context(r(2, c.text_len, c.text_dim), r(2, 257, c.clip_dim)),
        'clean': (r(2, 16, 1, H, W), r(2, 20, 1, H, W)),
        'noisy': (r(2, 16, 2, H, W), r(2, 20, 2, H, W)),
        'timestep': timestep,
        'action': r(2, c.num_action_per_block, c.action_dim),
        'timestep_action': timestep_action,
        'state': r(2, 1, c.max_state_dim),
    }


def assert_same_call(a, b, tol=1e-6):
    (out_a, cache_a), (out_b, cache_b) = a, b
    torch.testing.assert_close(out_a.video, out_b.video, rtol=tol, atol=tol)
    torch.testing.assert_close(out_a.action, out_b.action, rtol=tol, atol=tol)
    assert cache_a.length == cache_b.length == T
    torch.testing.assert_close(cache_a.k[:, :, :T], cache_b.k[:, :, :T], rtol=tol, atol=tol)
    torch.testing.assert_close(cache_a.v[:, :, :T], cache_b.v[:, :, :T], rtol=tol, atol=tol)


@pytest.mark.parametrize('mixed', [False, True])
def test_uniform_modulation_broadcasts_the_same_vectors(dit, mixed, monkeypatch):
    x = call_inputs(dit, mixed)
    reference = run_call(dit, x)
    per_token = FastBlockRunner(dit, AccelerationConfig(uniform_modulation=False))
    uniform = FastBlockRunner(dit, AccelerationConfig())
    shapes = []
    vectors = fast_blocks._token_vectors

    def spy(mod, segment, index, length):
        shapes.append((isinstance(segment, int), mod.shape[1]))
        return vectors(mod, segment, index, length)

    monkeypatch.setattr(fast_blocks, '_token_vectors', spy)
    assert_same_call(run_call(dit, x, per_token), reference, 1e-5)
    assert all(not broadcast for broadcast, _ in shapes)
    shapes.clear()
    fast = run_call(dit, x, uniform)
    # The prefill (all frames at t = 0) broadcasts one vector; a denoising call two (video,
    # registers), or, with per-frame / per-action timesteps, gathers one per frame and register.
    assert set(shapes) == {(True, 1), (False, 27) if mixed else (True, 2)}
    assert_same_call(fast, reference, 1e-5)
    assert_same_call(fast, run_call(dit, x, per_token))


def test_materialised_timesteps_take_the_per_token_path(dit, monkeypatch):
    x = call_inputs(dit)
    x['timestep'] = x['timestep'].clone()  # equal values, but not uniform by construction
    seen = []
    original = FastBlockRunner.segment_index
    monkeypatch.setattr(
        FastBlockRunner, 'segment_index', lambda self, *a: seen.append(a) or original(self, *a)
    )
    run_call(dit, x, FastBlockRunner(dit, AccelerationConfig()))
    assert seen == [(2, 2 * T + 25, 25)]


def test_fused_kv_write_fills_the_cache_like_separate_copies(dit):
    x = call_inputs(dit)
    separate = run_call(dit, x, FastBlockRunner(dit, AccelerationConfig(fused_kv_write=False)))
    fused_runner = FastBlockRunner(dit, AccelerationConfig())
    fused = run_call(dit, x, fused_runner)
    assert_same_call(fused, separate, 0)  # the same values, written elsewhere
    assert_same_call(fused, run_call(dit, x), 1e-5)


def test_compiled_stages_write_kv_in_place_without_recompiling(dit):
    """Dynamo traces the cache writes; the cache slots move every chunk, the graphs do not."""
    torch._dynamo.reset()
    counters.clear()
    eager = run_chunks(dit, DenoiseConfig(), chunk_stream(5, need_video=False))
    config = DenoiseConfig(acceleration=AccelerationConfig(compile='aot_eager'))
    compiled = run_chunks(dit, config, chunk_stream(5, need_video=False))
    # 3 stages x (prefill of 1 and 2 frames, denoising call of 2 rows and of 1 row)
    assert counters['stats']['unique_graphs'] == 12
    again = run_chunks(dit, config, chunk_stream(5, need_video=False, seed=4))
    assert counters['stats']['unique_graphs'] == 12
    for a, b in zip(compiled, eager, strict=True):
        torch.testing.assert_close(a.actions, b.actions, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(again[0].actions, compiled[0].actions)


def test_row_view_of_the_cache(dit):
    cache = dit.new_cache(2)
    view = cache.rows(1)
    assert view.k.data_ptr() == cache.k.data_ptr() and view.batch == 1
    with pytest.raises(RuntimeError, match='cannot commit'):
        view.commit()
    with pytest.raises(ValueError, match='rows'):
        cache.rows(3)
    view.length = cache.max_video_tokens
    with pytest.raises(RuntimeError, match='drop cached tokens'):
        view.begin(T, 0)


# ---------------------------------------------------------------- 4. VAE encoder


@pytest.mark.parametrize(('frames', 'per_pass'), [(9, 0), (9, 8), (33, 0), (33, 16)])
@pytest.mark.parametrize('channels_last', [False, True])
def test_vae_encoder_options_give_the_same_latents(frames, per_pass, channels_last):
    vae = randomize_(WanVAE(VAEConfig.tiny()), 0).eval()
    g = torch.Generator().manual_seed(frames)
    video = torch.rand(1, 3, frames, 32, 48, generator=g) * 2 - 1
    reference = vae.encode(video)  # upstream: 4 frames per pass
    latents = vae.encode(video, per_pass, channels_last)
    assert latents.is_contiguous() and latents.shape == reference.shape
    torch.testing.assert_close(latents, reference, rtol=1e-5, atol=1e-5)


def test_engine_vae_options_follow_compile():
    # (frames per pass, channels_last_3d, compile backend of the norms); round 3: 4 per pass.
    assert EngineConfig.tiny().vae_encode_options == (4, False, None)
    assert EngineConfig.tiny(compile=True).vae_encode_options == (4, False, None)  # CPU
    on_gpu = EngineConfig.tiny(compile=True, device='cuda')
    assert on_gpu.vae_encode_options == (4, True, 'inductor')
    assert on_gpu.replace(vae_frames_per_pass=0).vae_encode_options == (0, True, 'inductor')
    options = EngineConfig.tiny(vae_frames_per_pass=8, vae_channels_last=True).vae_encode_options
    assert options == (8, True, None)
    with pytest.raises(ConfigError, match='vae_frames_per_pass'):
        EngineConfig.tiny(vae_frames_per_pass=6)
    acceleration = EngineConfig.tiny(uniform_modulation=False, fused_kv_write=False).acceleration
    assert acceleration == AccelerationConfig(uniform_modulation=False, fused_kv_write=False)


def test_engine_with_fast_vae_predicts_like_the_reference():
    reference = DreamZeroEngine.from_config(EngineConfig.tiny(dtype='float32'), seed=3)
    fast = DreamZeroEngine(
        EngineConfig.tiny(dtype='float32', vae_frames_per_pass=32, vae_channels_last=True),
        reference.modules,
        reference.tokenizer,
        reference.normalizer,
    )
    for step in range(5):  # a new window (33 frames encoded) and continuing chunks (9 frames)
        observation = random_observation(seed=step, session_id='s', stamp=step / 15)
        a, b = reference.infer(observation).actions, fast.infer(observation).actions
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
