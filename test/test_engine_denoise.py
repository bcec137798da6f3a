# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The per-chunk denoising loop: windows, CFG, seeds, sessions, step caching, input errors."""

import dataclasses

import pytest
import torch

from dreamzero_ros.engine.config import Sampling
from dreamzero_ros.engine.networks.dit import CausalWanDiT
from dreamzero_ros.engine.networks.dit_config import DiTConfig
from dreamzero_ros.engine.networks.init import randomize_
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.engine.pipeline.denoise import ChunkDenoiser, ChunkInputs
from dreamzero_ros.engine.pipeline.scheduler import FlowUniPCScheduler
from dreamzero_ros.engine.step_cache import (
    STATIC_DIT_STEP_MASKS,
    StepCacheConfig,
    StepSchedule,
)

H, W = 4, 6
T = (H // 2) * (W // 2)


@pytest.fixture(scope='module')
def model():
    config = dataclasses.replace(DiTConfig.tiny(), frame_seqlen=T)
    return randomize_(CausalWanDiT(config), 0).eval()


@pytest.fixture(scope='module')
def model64(model):
    config = model.config
    return randomize_(CausalWanDiT(config).double(), 0).eval()


def make_inputs(model, seed=0, batch=1):
    c = model.config
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g).to(model.dtype)

    return {
        'prompt': r(batch, c.text_len, c.text_dim),
        'negative': r(batch, c.text_len, c.text_dim),
        'clip': r(batch, 257, c.clip_dim),
        'y': r(batch, 20, 9, H, W),
        'frames': [r(batch, 16, 1, H, W)] + [r(batch, 16, 3, H, W) for _ in range(8)],
        'states': [r(batch, c.max_state_dim) for _ in range(9)],
    }


def chunk(x, k, session, prompt=None, negative=None):
    """Inputs of the k-th call of a session (new window when the session needs one)."""
    new = session.needs_new_window
    frames = x['frames'][k][:, :, -1:] if new else x['frames'][k]
    return ChunkInputs(
        prompt_embeds=x['prompt'] if prompt is None else prompt,
        negative_prompt_embeds=x['negative'] if negative is None else negative,
        context_latents=frames,
        state=x['states'][k],
        new_window=new,
        clip_tokens=x['clip'] if new else None,
        y=x['y'] if new else None,
    )


def run(denoiser, x, calls, **kw):
    session = denoiser.open_session()
    outs = [denoiser.denoise_chunk(session, chunk(x, k, session, **kw)) for k in range(calls)]
    return session, outs


def test_window_lifecycle_and_output_shapes(model):
    denoiser = ChunkDenoiser(model)
    x = make_inputs(model)
    session, outs = run(denoiser, x, 5)
    # Window of 9 frames, 2 per chunk after the conditioning frame: 4 chunks, then a new window.
    assert [o.start_frame for o in outs] == [1, 3, 5, 7, 1]
    for out in outs:
        assert out.actions.shape == (1, 24, 32)
        assert out.video_latents.shape == (1, 16, 2, H, W)
        assert out.dit_calls == 8  # upstream default: static 8 of 16 steps
        assert set(out.timings_ms) == {'context', 'prefill', 'denoise'}
        assert torch.isfinite(out.actions).all() and torch.isfinite(out.video_latents).all()
    assert session.start_frame == 3
    # After four chunks the cache held frames 0..6 and the window is used up again later.
    assert not session.window_full


def test_same_inputs_same_seed_same_outputs_different_seed_differs(model):
    x = make_inputs(model)
    _, a = run(ChunkDenoiser(model), x, 2)
    _, b = run(ChunkDenoiser(model), x, 2)
    _, c = run(ChunkDenoiser(model, Sampling(seed=7)), x, 2)
    for oa, ob in zip(a, b, strict=True):
        assert torch.equal(oa.actions, ob.actions)
        assert torch.equal(oa.video_latents, ob.video_latents)
    assert not torch.allclose(a[1].actions, c[1].actions)


def test_context_history_changes_the_prediction(model):
    x = make_inputs(model)
    _, base = run(ChunkDenoiser(model), x, 2)
    y = dict(x, frames=[x['frames'][0], x['frames'][1] + 1.0] + x['frames'][2:])
    _, other = run(ChunkDenoiser(model), y, 2)
    assert torch.equal(base[0].actions, other[0].actions)
    assert not torch.allclose(base[1].actions, other[1].actions)


def test_sessions_are_isolated(model):
    denoiser = ChunkDenoiser(model)
    xa, xb = make_inputs(model, seed=1), make_inputs(model, seed=2)
    _, alone_a = run(ChunkDenoiser(model), xa, 3)
    _, alone_b = run(ChunkDenoiser(model), xb, 3)
    sa, sb = denoiser.open_session(), denoiser.open_session()
    for k in range(3):
        out_a = denoiser.denoise_chunk(sa, chunk(xa, k, sa))
        out_b = denoiser.denoise_chunk(sb, chunk(xb, k, sb))
        assert torch.equal(out_a.actions, alone_a[k].actions)
        assert torch.equal(out_b.actions, alone_b[k].actions)
    denoiser.close_session(sa)
    assert sa.cache is None and sa.needs_new_window


def test_batch_rows_are_independent(model):
    x1, x2 = make_inputs(model, seed=3), make_inputs(model, seed=4)

    def stack(a, b):
        return {
            k: [torch.cat(p) for p in zip(a[k], b[k], strict=True)]
            if isinstance(a[k], list)
            else torch.cat([a[k], b[k]])
            for k in a
        }

    _, base = run(ChunkDenoiser(model), stack(x1, x2), 2)
    changed = dict(x1, prompt=x1['prompt'] + 1.0, states=[s + 0.5 for s in x1['states']])
    _, other = run(ChunkDenoiser(model), stack(changed, x2), 2)
    assert base[1].actions.shape == (2, 24, 32)
    torch.testing.assert_close(base[1].actions[1], other[1].actions[1])
    torch.testing.assert_close(base[1].video_latents[1], other[1].video_latents[1])
    assert not torch.allclose(base[1].actions[0], other[1].actions[0])


def one_step_flows(model64, x, cfg_scale, prompt, negative):
    """Run a 1-step chunk and recover (video velocity, action velocity) from its result."""
    config = Sampling(num_inference_steps=1, cfg_scale=cfg_scale)
    denoiser = ChunkDenoiser(model64, config, EngineOptions(step_cache='full'))
    _, (out,) = run(denoiser, x, 1, prompt=prompt, negative=negative)
    sched = FlowUniPCScheduler(shift=5.0)
    sched.set_timesteps(1)
    sigma = float(sched.sigmas[0])
    gen = torch.Generator().manual_seed(config.seed)
    noise_video = torch.randn(out.video_latents.shape, generator=gen, dtype=torch.float64)
    gen = torch.Generator().manual_seed(config.seed)
    noise_action = torch.randn(out.actions.shape, generator=gen, dtype=torch.float64)
    # A single step to sigma 0 lands on x0 = noise - sigma * velocity.
    return (noise_video - out.video_latents) / sigma, (noise_action - out.actions) / sigma


def test_cfg_combines_video_only_and_takes_actions_from_the_conditional_branch(model64):
    x = make_inputs(model64)
    cond_v, cond_a = one_step_flows(model64, x, 1.0, x['prompt'], None)
    uncond_v, _ = one_step_flows(model64, x, 1.0, x['negative'], None)
    cfg_v, cfg_a = one_step_flows(model64, x, 5.0, x['prompt'], x['negative'])
    assert not torch.allclose(cond_v, uncond_v)
    torch.testing.assert_close(cfg_v, uncond_v + 5.0 * (cond_v - uncond_v), rtol=1e-7, atol=1e-7)
    torch.testing.assert_close(cfg_a, cond_a, rtol=1e-9, atol=1e-9)


def test_without_cfg_the_negative_prompt_is_not_needed(model):
    denoiser = ChunkDenoiser(model, Sampling(cfg_scale=1.0))
    x = make_inputs(model)
    session = denoiser.open_session()
    inputs = dataclasses.replace(chunk(x, 0, session), negative_prompt_embeds=None)
    out = denoiser.denoise_chunk(session, inputs)
    assert session.cache.batch == 1
    assert out.dit_calls == 8


class TimestepSpy:
    """Records the video timestep of every denoising DiT call."""

    def __init__(self, model):
        self.timesteps = []
        self.handle = model.register_forward_pre_hook(self.hook)

    def hook(self, module, args):
        self.timesteps.append(int(args[2][0, 0]))


def test_static_schedule_runs_upstream_steps(model):
    x = make_inputs(model)
    spy = TimestepSpy(model)
    try:
        _, (out,) = run(ChunkDenoiser(model), x, 1)
    finally:
        spy.handle.remove()
    sched = FlowUniPCScheduler(shift=5.0)
    sched.set_timesteps(16)
    mask = STATIC_DIT_STEP_MASKS[8]
    assert [i for i, m in enumerate(mask) if m] == [0, 1, 2, 6, 10, 13, 14, 15]
    assert spy.timesteps == [int(t) for t, m in zip(sched.timesteps, mask, strict=True) if m]
    assert out.dit_calls == 8


def test_full_and_dynamic_schedules(model):
    x = make_inputs(model)
    full, dynamic = EngineOptions(step_cache='full'), EngineOptions(step_cache='dynamic')
    never_skip = Sampling(step_cache_tuning=StepCacheConfig(thresholds=(1.0,), countdowns=(4,)))
    always_skip = Sampling(step_cache_tuning=StepCacheConfig(thresholds=(-1.0,), countdowns=(4,)))
    _, (ref,) = run(ChunkDenoiser(model, Sampling(), full), x, 1)
    _, (same,) = run(ChunkDenoiser(model, never_skip, dynamic), x, 1)
    _, (skipping,) = run(ChunkDenoiser(model, always_skip, dynamic), x, 1)
    _, (default,) = run(ChunkDenoiser(model, Sampling(), dynamic), x, 1)
    assert ref.dit_calls == 16 and same.dit_calls == 16
    assert torch.equal(ref.actions, same.actions)
    assert torch.equal(ref.video_latents, same.video_latents)
    # Steps 0 and 1 always run; then skip 4, run 1 unconditionally, skip 4, ...: 0, 1, 6, 11.
    assert skipping.dit_calls == 4
    assert 2 <= default.dit_calls <= 16
    assert not torch.equal(ref.actions, skipping.actions)


def test_dynamic_schedule_decisions():
    schedule = StepSchedule('dynamic', StepCacheConfig(), 16)
    a = torch.ones(1, 8)
    decisions = []
    velocities = [a, a * 2, a * 3, a, a, a, a, a, -a, a, a, a, a, a, a, a]
    for i in range(16):
        run_it = schedule.should_run(i)
        decisions.append(run_it)
        if run_it:
            schedule.record(velocities[i])
    # Parallel velocities (similarity 1 > 0.95): skip 4 steps, then one forced run.
    assert decisions[:8] == [True, True, False, False, False, False, True, False]
    orthogonal = StepSchedule('dynamic', StepCacheConfig(), 16)
    for i, v in enumerate([torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])] * 8):
        assert orthogonal.should_run(i)
        orthogonal.record(v)


def test_step_cache_config_errors(model):
    with pytest.raises(ValueError, match='mode'):
        StepSchedule('sometimes', StepCacheConfig(), 16)
    with pytest.raises(ValueError, match='DiT steps'):
        StepSchedule('static', StepCacheConfig(dit_steps=9), 16)
    with pytest.raises(ValueError, match='pair up'):
        StepCacheConfig(thresholds=(0.9,), countdowns=())
    with pytest.raises(ValueError, match='16 steps'):
        ChunkDenoiser(model, Sampling(num_inference_steps=10))
    ChunkDenoiser(model, Sampling(num_inference_steps=10), EngineOptions(step_cache='full'))


def test_bad_inputs_are_clear_errors_and_change_nothing(model):
    denoiser = ChunkDenoiser(model)
    x = make_inputs(model)
    session = denoiser.open_session()
    good = chunk(x, 0, session)
    cases = {
        'needs a new window': dataclasses.replace(good, new_window=False),
        'negative_prompt_embeds': dataclasses.replace(good, negative_prompt_embeds=None),
        'prompt_embeds': dataclasses.replace(good, prompt_embeds=x['prompt'][:, :100]),
        'NaN': dataclasses.replace(good, state=torch.full_like(x['states'][0], float('nan'))),
        'state': dataclasses.replace(good, state=x['states'][0][:, :8]),
        '1 context latent frame': dataclasses.replace(good, context_latents=x['frames'][1]),
        'clip_tokens': dataclasses.replace(good, clip_tokens=None),
        'y must': dataclasses.replace(good, y=x['y'][:, :, :, :2]),
        'frame_seqlen': dataclasses.replace(
            good,
            context_latents=torch.zeros(1, 16, 1, 8, 8),
            y=torch.zeros(1, 20, 9, 8, 8),
        ),
    }
    for message, bad in cases.items():
        with pytest.raises(ValueError, match=message):
            denoiser.denoise_chunk(session, bad)
        assert session.start_frame == 0
    denoiser.denoise_chunk(session, good)
    follow = chunk(x, 1, session)
    with pytest.raises(ValueError, match='context latent frames'):
        denoiser.denoise_chunk(
            session, dataclasses.replace(follow, context_latents=x['frames'][1][:, :, :1])
        )
    assert session.start_frame == 3
    out = denoiser.denoise_chunk(session, follow)
    assert out.start_frame == 3
