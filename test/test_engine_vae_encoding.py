# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The VAE encoder's speed options give the reference latents.

Frames per pass, ``channels_last_3d`` activations and the compiled norm/SiLU/time padding
(:class:`FusedNormConv`) change the rounding only.
"""

import numpy as np
import pytest
import torch
from torch._dynamo.utils import counters

from dreamzero_ros.engine import DreamZeroEngine, EngineConfig
from dreamzero_ros.engine.checkpoint.synthetic_droid import random_observation
from dreamzero_ros.engine.networks.init import randomize_
from dreamzero_ros.engine.networks.vae import WanVAE
from dreamzero_ros.engine.networks.vae_network import VAEConfig
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.engine.speed.acceleration import VAEEncoding
from dreamzero_ros.engine.speed.vae_fused import FusedNormConv


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


@pytest.mark.parametrize(('frames', 'per_pass'), [(9, 4), (17, 4), (17, 0)])
@pytest.mark.parametrize('channels_last', [True, False])
def test_compiled_vae_norms_give_the_reference_latents(frames, per_pass, channels_last):
    vae = randomize_(WanVAE(VAEConfig.tiny()), 0).eval()
    video = torch.rand(1, 3, frames, 32, 48, generator=torch.Generator().manual_seed(frames))
    reference = vae.encode(video * 2 - 1)  # upstream: 4 frames per pass, default layout
    for backend in ('eager', 'aot_eager'):
        latents = vae.encode(video * 2 - 1, per_pass, channels_last, FusedNormConv(backend))
        assert latents.shape == reference.shape and latents.is_contiguous()
        torch.testing.assert_close(latents, reference, rtol=1e-5, atol=1e-5)


def test_compiled_vae_norms_stream_piece_by_piece_with_one_graph():
    """Dynamic shapes: every layer, frame count and history state shares one compiled graph."""
    vae = randomize_(WanVAE(VAEConfig.tiny()), 1).eval()
    video = torch.rand(1, 3, 17, 32, 48, generator=torch.Generator().manual_seed(2)) * 2 - 1
    reference = vae.encode(video)
    torch._dynamo.reset()
    counters.clear()
    stream = vae.encode_stream(4, True, FusedNormConv('aot_eager'))
    pieces = [stream.push(video[:, :, a:b]) for a, b in ((0, 3), (3, 4), (4, 13), (13, 17))]
    torch.testing.assert_close(torch.cat(pieces, dim=2), reference, rtol=1e-5, atol=1e-5)
    assert counters['stats']['unique_graphs'] == 1
    with pytest.raises(ValueError, match='one video at a time'):
        vae.encode(torch.cat([video, video]), 4, True, FusedNormConv('eager'))


def test_fused_norm_conv_refuses_other_convolutions():
    vae = WanVAE(VAEConfig.tiny())
    block = vae.model.encoder.downsamples[0]
    shortcut_like = vae.model.conv1  # a 1x1x1 convolution: no time padding
    with pytest.raises(ValueError, match='3 frames'):
        FusedNormConv('eager')(block.residual[0], shortcut_like, torch.zeros(1, 4, 1, 8, 8), {})


def test_engine_with_the_fast_vae_encoding_predicts_like_the_reference():
    reference = DreamZeroEngine.from_config(
        EngineConfig.tiny(options=EngineOptions(device='cpu', dtype='float32')), seed=3
    )
    fast = DreamZeroEngine(
        reference.config, reference.modules, reference.tokenizer, reference.embodiment
    )
    # What compile on CUDA selects, with dynamo tracing only (exact in float32 on the CPU).
    fast.vae_encoding = VAEEncoding(channels_last=True, compile_backend='eager')
    for step in range(5):  # a new window (17 frames encoded) and continuing chunks (9 frames)
        observation = random_observation(seed=step, session_id='s', stamp=step / 15)
        a, b = reference.infer(observation).actions, fast.infer(observation).actions
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
