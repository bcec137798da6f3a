# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A tiny DiT, one call's inputs and the call as the engine makes it, for the speed tests."""

import dataclasses

import torch

from dreamzero_ros.engine.networks.dit import CausalWanDiT
from dreamzero_ros.engine.networks.dit_config import DiTConfig
from dreamzero_ros.engine.networks.init import randomize_
from dreamzero_ros.engine.speed.acceleration import (
    BlockRuns,
    compile_block,
    transform_blocks_,
)

H, W = 4, 6
#: Tokens per latent frame of the tiny DiT's (H, W) latents.
T = (H // 2) * (W // 2)


def make_dit(dtype=torch.float32, seed=0):
    """The tiny DiT with (H, W) latents, seeded random weights."""
    config = dataclasses.replace(DiTConfig.tiny(), frame_seqlen=T)
    return randomize_(CausalWanDiT(config).to(dtype), seed).eval()


def call_inputs(dit, timesteps='uniform', seed=1):
    """A new window's prefill and one denoising call's inputs (batch 2, as batched CFG).

    ``timesteps``: ``uniform`` (one per row and kind, ``(2, 1)``, as the denoiser gives them),
    ``per_token`` (the same values, one per frame and per action) or ``mixed`` (differing).
    """
    c = dit.config
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g).to(dit.dtype)

    actions = c.num_action_per_block
    timestep, timestep_action = {
        'uniform': (torch.full((2, 1), 733), torch.full((2, 1), 600)),
        'per_token': (torch.full((2, 2), 733), torch.full((2, actions), 600)),
        'mixed': (torch.tensor([[733, 500]] * 2), torch.arange(actions).repeat(2, 1) * 30),
    }[timesteps]
    return {
        'context': dit.prepare_context(r(2, c.text_len, c.text_dim), r(2, 257, c.clip_dim)),
        'clean': (r(2, 16, 1, H, W), r(2, 20, 1, H, W)),
        'noisy': (r(2, 16, 2, H, W), r(2, 20, 2, H, W)),
        'timestep': timestep,
        'action': r(2, actions, c.action_dim),
        'timestep_action': timestep_action,
        'state': r(2, 1, c.max_state_dim),
    }


def transformed(dit, compile_backend=None, fp8='off'):
    """Transform ``dit``'s blocks in place (:func:`transform_blocks_`); return how they run.

    The blocks run eagerly unless ``compile_backend``; with ``fp8`` their linears are FP8.
    """
    transform_blocks_(dit, fp8)
    if compile_backend is None:
        return eager(dit)
    return BlockRuns(tuple(compile_block(block, compile_backend) for block in dit.blocks))


def eager(dit):
    """The blocks of ``dit`` running eagerly (as written, transformed or not)."""
    return BlockRuns((None,) * len(dit.blocks))


@torch.no_grad()
def run_call(dit, x, runs=None):
    """Prefill ``x['clean']`` into a fresh 2-row cache, then one denoising call on ``x['noisy']``.

    The blocks run as ``runs`` says (eagerly when None), eagerly again afterwards.
    Returns the call's output and the cache.
    """
    (runs or eager(dit)).install(dit)
    try:
        cache = dit.new_cache(2)
        dit.prefill(*x['clean'], x['context'], cache, 0)
        out = dit(
            *x['noisy'],
            x['timestep'],
            x['context'],
            cache,
            1,
            x['action'],
            x['timestep_action'],
            x['state'],
        )
    finally:
        eager(dit).install(dit)
    return out, cache


def rel(a, b):
    """Relative difference ``|a - b| / |b|`` (Frobenius norms, float32)."""
    return float((a.float() - b.float()).norm() / b.float().norm())
