# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Chunk-causal attention over the K/V cache equals the full sequence under the causal mask.

The reference runs the same blocks once over the whole token sequence
``[frame 0 | frames 1-2 | noisy frames 3-4 | actions | state]`` with a dense block-causal mask
(clean frames see the clean frames up to their own block; noisy video, action and state tokens
see everything), with per-frame timesteps (0 for clean frames) and absolute rotary positions.
The incremental path is what inference does: prefill frame 0, prefill frames 1-2, denoise 3-4.
"""

import dataclasses
import math

import pytest
import torch

from dreamzero_ros.engine.networks.attention import sdpa
from dreamzero_ros.engine.networks.dit import CausalWanDiT
from dreamzero_ros.engine.networks.dit_block import Modulation, sinusoidal_embedding
from dreamzero_ros.engine.networks.dit_config import DiTConfig
from dreamzero_ros.engine.networks.init import randomize_
from dreamzero_ros.engine.networks.rope import RopeTables, Rotary, apply_rotary, rope_angles

H, W = 4, 6  # latent grid -> 2 x 3 = 6 tokens per frame
T = (H // 2) * (W // 2)


def make_model(**overrides) -> CausalWanDiT:
    config = dataclasses.replace(DiTConfig.tiny(), frame_seqlen=T, **overrides)
    return randomize_(CausalWanDiT(config).double(), 0).eval()


class MaskedFullAttention:
    """Reference backend: attention over the call's own tokens with a dense mask."""

    def __init__(self, mask: torch.Tensor) -> None:
        self.mask = mask
        self.k = self.v = None

    def layer(self, index):
        return self

    def write(self, k, v):
        self.k, self.v = k, v

    def attend_written(self, q):
        return sdpa(q, self.k, self.v, self.mask)


def inputs(model: CausalWanDiT, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    c = model.config

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    return {
        'lat0': r(1, 16, 1, H, W),
        'lat12': r(1, 16, 2, H, W),
        'noisy': r(1, 16, 2, H, W),
        'y': r(1, 20, 5, H, W),
        'action': r(1, c.num_action_per_block, c.action_dim),
        'state': r(1, 1, c.max_state_dim),
        'text': r(1, c.text_len, c.text_dim),
        'clip': r(1, 257, c.clip_dim),
    }


def incremental(model, x, t_video=700, t_action=650, window=None):
    ctx = model.prepare_context(x['text'], x['clip'])
    cache = model.new_cache(1)
    model.prefill(x['lat0'], x['y'][:, :, 0:1], ctx, cache, 0)
    model.prefill(x['lat12'], x['y'][:, :, 1:3], ctx, cache, 1)
    na = model.config.num_action_per_block
    return model(
        x['noisy'],
        x['y'][:, :, 3:5],
        torch.full((1, 2), t_video),
        ctx,
        cache,
        3,
        x['action'],
        torch.full((1, na), t_action),
        x['state'],
    ), cache


def full_sequence(model, x, t_video=700, t_action=650, window_frames=None):
    c = model.config
    na = c.num_action_per_block
    ctx = model.prepare_context(x['text'], x['clip'])
    lat = torch.cat([x['lat0'], x['lat12'], x['noisy']], dim=2)
    video, grid = model.embed_video(lat, x['y'])
    t_act = torch.full((1, na), t_action)
    registers = model.embed_registers(x['action'], t_act, x['state'])
    tokens = torch.cat([video, registers], dim=1)
    timesteps = torch.cat([torch.tensor([[0, 0, 0, t_video, t_video]]), t_act, t_act[:, :1]], dim=1)
    e, e0 = model.time_embeddings(timesteps)
    tables = model.rope_tables()
    rotary = Rotary.cat([tables.video(0, *grid), tables.registers(1, na, 1)])
    n = tokens.shape[1]
    mask = torch.zeros(n, n, dtype=torch.bool)
    mask[:T, :T] = True  # frame 0: itself
    mask[T : 3 * T, : 3 * T] = True  # frames 1-2: frames 0-2
    first = 0 if window_frames is None else (5 - window_frames) * T
    mask[3 * T :, first:] = True  # noisy video + registers: everything in the window
    modulation = Modulation(e0, 5, uniform=False)
    out = model.run_blocks(tokens, modulation, rotary, ctx, MaskedFullAttention(mask))
    video_out = model.head(out[:, 3 * T : 5 * T], e[:, 3:5], 2)
    action_out = model.action_decoder(out[:, 5 * T : 5 * T + na])
    return model.unpatchify(video_out, (2, H // 2, W // 2)), action_out


@torch.no_grad()
def test_cache_equals_full_sequence_with_block_causal_mask():
    model = make_model()
    x = inputs(model)
    out, cache = incremental(model, x)
    ref_video, ref_action = full_sequence(model, x)
    assert out.video.shape == (1, 16, 2, H, W)
    assert out.action.shape == (1, 24, 32)
    torch.testing.assert_close(out.video, ref_video, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(out.action, ref_action, rtol=1e-9, atol=1e-9)
    # Only the clean frames were cached; a denoising call leaves the cache as it was.
    assert cache.length == 3 * T


@torch.no_grad()
def test_denoising_calls_do_not_change_the_cache():
    model = make_model()
    x = inputs(model)
    ctx = model.prepare_context(x['text'], x['clip'])
    out1, cache = incremental(model, x)
    again = model(
        x['noisy'],
        x['y'][:, :, 3:5],
        torch.full((1, 2), 700),
        ctx,
        cache,
        3,
        x['action'],
        torch.full((1, 24), 650),
        x['state'],
    )
    assert torch.equal(out1.video, again.video)
    assert torch.equal(out1.action, again.action)


@torch.no_grad()
def test_sliding_window_drops_the_oldest_frames():
    # max_chunk_size 1 -> windows of 3 frames: the denoising call sees frame 2 + its own frames.
    model = make_model(max_chunk_size=1)
    assert model.config.max_attention_tokens == 3 * T
    x = inputs(model)
    out, cache = incremental(model, x)
    ref_video, ref_action = full_sequence(model, x, window_frames=3)
    torch.testing.assert_close(out.video, ref_video, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(out.action, ref_action, rtol=1e-9, atol=1e-9)
    wrong_video, _ = full_sequence(model, x)
    assert not torch.allclose(out.video, wrong_video)


@torch.no_grad()
def test_outputs_depend_on_timestep_context_and_state():
    model = make_model()
    x = inputs(model)
    base, _ = incremental(model, x)
    other_t, _ = incremental(model, x, t_video=300)
    assert not torch.allclose(base.video, other_t.video)
    y = dict(x, state=x['state'] + 1)
    other_state, _ = incremental(model, y)
    assert not torch.allclose(base.action, other_state.action)
    y = dict(x, lat0=x['lat0'] + 1)
    other_context, _ = incremental(model, y)
    assert not torch.allclose(base.action, other_context.action)


def test_rotary_matches_complex_multiplication():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 3, 8, generator=g, dtype=torch.float64)
    angles = torch.rand(5, 4, generator=g, dtype=torch.float64) * 6
    rotated = apply_rotary(x, Rotary(angles.cos(), angles.sin()))
    reference = torch.view_as_real(
        torch.view_as_complex(x.reshape(2, 5, 3, 4, 2))
        * torch.polar(torch.ones_like(angles), angles)[:, None]
    ).flatten(3)
    torch.testing.assert_close(rotated, reference)


def test_video_rotary_splits_head_dim_44_42_42():
    tables = RopeTables(128)
    rot = tables.video(3, 2, 4, 5)
    assert rot.cos.shape == (2 * 4 * 5, 64)
    token = 1 * 20 + 2 * 5 + 4  # frame 1, row 2, column 4 (frame-major order)
    expected = torch.cat([rope_angles(8, 44)[3 + 1], rope_angles(8, 42)[2], rope_angles(8, 42)[4]])
    torch.testing.assert_close(rot.cos[token], expected.cos().float())
    torch.testing.assert_close(rot.sin[token], expected.sin().float())


def test_register_rotary_indexed_by_chunk():
    tables = RopeTables(128)
    rot = tables.registers(2, 24, 1)
    assert len(rot) == 25
    full = rope_angles(1024, 128)
    torch.testing.assert_close(rot.cos[:24], full[48:72].cos().float())
    torch.testing.assert_close(rot.cos[24], full[2].cos().float())
    with pytest.raises(ValueError):
        tables.registers(-1, 24, 1)


def test_sinusoidal_time_embedding_is_cos_then_sin():
    emb = sinusoidal_embedding(8, torch.tensor([0, 10]))
    assert emb.dtype == torch.float64
    freqs = 10000.0 ** (-torch.arange(4, dtype=torch.float64) / 4)
    torch.testing.assert_close(emb[1], torch.cat([(10 * freqs).cos(), (10 * freqs).sin()]))
    assert math.isclose(float(emb[0, 0]), 1.0)


@torch.no_grad()
def test_unpatchify_inverts_the_patch_layout():
    model = make_model()
    c = model.config
    grid = (2, 2, 3)
    tokens = torch.arange(1 * 12 * 4 * c.out_dim, dtype=torch.float64).view(1, 12, 4 * c.out_dim)
    video = model.unpatchify(tokens, grid)
    assert video.shape == (1, c.out_dim, 2, 4, 6)
    # Token (f=1, h=0, w=2), patch offset (p=1, q=0), channel 5.
    token = 1 * 6 + 0 * 3 + 2
    assert video[0, 5, 1, 0 * 2 + 1, 2 * 2 + 0] == tokens[0, token, (1 * 2 + 0) * c.out_dim + 5]


@torch.no_grad()
def test_bad_shapes_are_clear_errors():
    model = make_model()
    x = inputs(model)
    ctx = model.prepare_context(x['text'], x['clip'])
    cache = model.new_cache(1)
    with pytest.raises(ValueError, match='frame_seqlen'):
        model.prefill(torch.zeros(1, 16, 1, 8, 8), torch.zeros(1, 20, 1, 8, 8), ctx, cache, 0)
    with pytest.raises(ValueError, match='channels'):
        model.prefill(x['lat0'], x['y'][:, :4, :1], ctx, cache, 0)
    with pytest.raises(ValueError, match='text embeddings'):
        model.prepare_context(x['text'][:, :10], x['clip'])
    with pytest.raises(ValueError, match='start_frame'):
        model(
            x['noisy'],
            x['y'][:, :, :2],
            torch.zeros(1, 2),
            ctx,
            cache,
            0,
            x['action'],
            torch.zeros(1, 24),
            x['state'],
        )


def test_row_view_of_the_cache():
    cache = make_model().new_cache(2)
    view = cache.rows(1)
    assert view.k.data_ptr() == cache.k.data_ptr() and view.batch == 1
    with pytest.raises(RuntimeError, match='cannot commit'):
        view.commit()
    with pytest.raises(ValueError, match='rows'):
        cache.rows(3)
    view.length = cache.max_video_tokens
    with pytest.raises(RuntimeError, match='drop cached tokens'):
        view.begin(T, 0)
