# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Third round of engine speed options, each against the reference path on the CPU.

* the camera views prepared with torch operations that run on any device (the engine's GPU:
  the host only uploads uint8 frames), the same operations as the previous NumPy path;
* the VAE encoder 4 frames per pass by default, and its RMS norm, SiLU and causal time padding
  compiled into one kernel per layer;
* the FFN input projection with its tanh GELU in the cuBLASLt epilogue on CUDA.
"""

import json
from pathlib import Path
import subprocess
import sys

import numpy as np
import pytest
from test_engine_acceleration import call_inputs, make_dit, run_call
import torch
from torch._dynamo.utils import counters
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
import torch.nn.functional as F  # noqa: N812

from dreamzero_ros.engine import DreamZeroEngine, EngineConfig
from dreamzero_ros.engine.checkpoint import randomize_
from dreamzero_ros.engine.droid_inputs import (
    ViewGeometry,
    prepare_view,
    prepare_views,
    stitch_droid_views,
    to_model_video,
)
from dreamzero_ros.engine.fast_blocks import AccelerationConfig, FastBlockRunner, _linear_gelu
from dreamzero_ros.engine.synthetic_droid import random_observation
from dreamzero_ros.engine.vae import FusedNormConv, VAEConfig, WanVAE
from dreamzero_ros.policy_types import DROID_CAMERAS

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- 1. view preparation


def _numpy_path(clips, geometry):
    """The previous host path, verbatim in its operations: per-view torch, NumPy stitch, upload."""
    views = {}
    for name in DROID_CAMERAS:
        images = torch.from_numpy(np.ascontiguousarray(clips[name])).permute(0, 3, 1, 2)
        images = images.float() / 255.0
        if images.shape[-2:] != geometry.source_size:
            from dreamzero_ros.engine.droid_inputs import resize_with_pad

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


@pytest.mark.parametrize('geometry', [ViewGeometry(), ViewGeometry(view_size=(16, 32))])
def test_views_prepared_with_torch_equal_the_numpy_path(geometry):
    for clips in _clip_sets():
        clips = {k: v if v.ndim == 4 else v[None] for k, v in clips.items()}
        stitched, video = _numpy_path(clips, geometry)
        on_torch = prepare_views(clips, geometry, 'cpu')
        assert on_torch.dtype == torch.uint8 and on_torch.device.type == 'cpu'
        np.testing.assert_array_equal(on_torch.numpy(), stitched)  # bit for bit
        assert torch.equal(to_model_video(on_torch, 'cpu', torch.float32), video)
        # The NumPy helpers other modules use are the same operations.
        views = {k: prepare_view(v, geometry) for k, v in clips.items()}
        np.testing.assert_array_equal(stitch_droid_views(views), stitched)


def test_inputs_on_device_follow_the_device():
    assert not EngineConfig.tiny().prepares_inputs_on_device
    assert EngineConfig.tiny(device='cuda').prepares_inputs_on_device
    assert not EngineConfig.tiny(device='cuda', inputs_on_device=False).prepares_inputs_on_device


def test_engine_reports_the_input_preparation_time():
    engine = DreamZeroEngine.from_config(EngineConfig.tiny(inputs_on_device=True), seed=0)
    chunk = engine.infer(random_observation(seed=0, size=(180, 320)))
    timing = chunk.timing_ms
    assert timing['inputs'] > 0
    assert timing['total'] >= timing['inputs'] + timing['encode'] + timing['denoise']


# ---------------------------------------------------------------- 2. VAE encoder


def test_vae_frames_per_pass_defaults_to_upstreams_four():
    assert EngineConfig().vae_frames_per_pass == 4
    assert EngineConfig(compile=True, device='cuda').vae_encode_options == (4, True, 'inductor')
    assert EngineConfig(compile=True, device='cuda', vae_compile=False).vae_encode_options == (
        4,
        True,
        None,
    )
    assert EngineConfig.tiny(vae_compile='aot_eager').vae_encode_options == (4, False, 'aot_eager')


@pytest.mark.parametrize(('frames', 'per_pass'), [(9, 4), (17, 4), (17, 0)])
@pytest.mark.parametrize('channels_last', [True, False])
def test_compiled_vae_norms_give_the_reference_latents(frames, per_pass, channels_last):
    vae = randomize_(WanVAE(VAEConfig.tiny()), 0).eval()
    video = torch.rand(1, 3, frames, 32, 48, generator=torch.Generator().manual_seed(frames))
    reference = vae.encode(video * 2 - 1)  # upstream: 4 frames per pass, default layout
    for backend in ('eager', 'aot_eager'):
        latents = vae.encode(video * 2 - 1, per_pass, channels_last, backend)
        assert latents.shape == reference.shape and latents.is_contiguous()
        torch.testing.assert_close(latents, reference, rtol=1e-5, atol=1e-5)


def test_compiled_vae_norms_stream_piece_by_piece_with_one_graph():
    """Dynamic shapes: every layer, frame count and history state shares one compiled graph."""
    vae = randomize_(WanVAE(VAEConfig.tiny()), 1).eval()
    video = torch.rand(1, 3, 17, 32, 48, generator=torch.Generator().manual_seed(2)) * 2 - 1
    reference = vae.encode(video)
    torch._dynamo.reset()
    counters.clear()
    stream = vae.encode_stream(4, True, 'aot_eager')
    pieces = [stream.push(video[:, :, a:b]) for a, b in ((0, 3), (3, 4), (4, 13), (13, 17))]
    torch.testing.assert_close(torch.cat(pieces, dim=2), reference, rtol=1e-5, atol=1e-5)
    assert counters['stats']['unique_graphs'] == 1
    with pytest.raises(ValueError, match='one video at a time'):
        vae.encode(torch.cat([video, video]), 4, True, 'eager')


def test_fused_norm_conv_refuses_other_convolutions():
    vae = WanVAE(VAEConfig.tiny())
    block = vae.model.encoder.downsamples[0]
    shortcut_like = vae.model.conv1  # a 1x1x1 convolution: no time padding
    with pytest.raises(ValueError, match='3 frames'):
        FusedNormConv('eager')(block.residual[0], shortcut_like, torch.zeros(1, 4, 1, 8, 8), {})


def test_engine_with_round3_options_predicts_like_the_reference():
    reference = DreamZeroEngine.from_config(EngineConfig.tiny(dtype='float32'), seed=3)
    fast = DreamZeroEngine(
        EngineConfig.tiny(
            dtype='float32',
            vae_channels_last=True,
            vae_compile='eager',
            inputs_on_device=True,
        ),
        reference.modules,
        reference.tokenizer,
        reference.normalizer,
    )
    for step in range(5):  # a new window (17 frames encoded) and continuing chunks (9 frames)
        observation = random_observation(seed=step, session_id='s', stamp=step / 15)
        a, b = reference.infer(observation).actions, fast.infer(observation).actions
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- 3. GELU epilogue


def _traced_ops(fn, *shapes, device='cuda'):
    with FakeTensorMode():
        tensors = [torch.empty(*s, device=device, dtype=torch.bfloat16) for s in shapes]
        graph = make_fx(fn)(*tensors)
    return [str(node.target) for node in graph.graph.nodes if node.op == 'call_function']


def test_gelu_epilogue_is_one_cublaslt_product_on_cuda():
    shapes = ((2, 5, 16), (32, 16), (32,))
    fused = _traced_ops(lambda x, w, b: _linear_gelu(x, (w, None, b), True), *shapes)
    assert 'aten._addmm_activation.default' in fused and 'aten.gelu.default' not in fused
    separate = _traced_ops(lambda x, w, b: _linear_gelu(x, (w, None, b), False), *shapes)
    assert 'aten._addmm_activation.default' not in separate and 'aten.gelu.default' in separate
    # The CPU's _addmm_activation applies the erf GELU, so the CPU keeps the separate kernels.
    on_cpu = _traced_ops(lambda x, w, b: _linear_gelu(x, (w, None, b), True), *shapes, device='cpu')
    assert 'aten.gelu.default' in on_cpu


def test_cuda_addmm_activation_is_the_tanh_gelu():
    """The reference decomposition of the op: on CUDA tensors, gelu(approximate='tanh')."""
    from torch._decomp import decomposition_table

    decomposition = decomposition_table[torch.ops.aten._addmm_activation.default]
    with FakeTensorMode():
        b, x, w = (torch.empty(*s, device='cuda') for s in ((32,), (5, 16), (16, 32)))
        graph = make_fx(lambda b, x, w: decomposition(b, x, w, use_gelu=True))(b, x, w)
    gelus = [n for n in graph.graph.nodes if n.target == torch.ops.aten.gelu.default]
    assert len(gelus) == 1 and gelus[0].kwargs.get('approximate') == 'tanh'


def test_fast_runner_with_gelu_epilogue_is_the_reference_on_cpu():
    dit = make_dit()
    x = call_inputs(dit)
    reference, _ = run_call(dit, x)
    for epilogue in (True, False):
        out, _ = run_call(dit, x, FastBlockRunner(dit, AccelerationConfig(gelu_epilogue=epilogue)))
        torch.testing.assert_close(out.video, reference.video, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out.action, reference.action, rtol=1e-5, atol=1e-5)
    assert EngineConfig.tiny(gelu_epilogue=False).acceleration.gelu_epilogue is False


# ---------------------------------------------------------------- benchmark


def test_benchmark_times_inputs_and_round3_variants(tmp_path):
    out = tmp_path / 'bench.json'
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / 'benchmarks' / 'engine_benchmark.py'),
            *('--preset', 'tiny', '--device', 'cpu', '--threads', '1'),
            *('--warmup', '1', '--repeats', '2', '--inputs', '--gelu'),
            *('--variants', 'eager', 'eager-r2', '--json', str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert 'view preparation' in result.stdout and 'inputs' in result.stdout
    report = json.loads(out.read_text())
    eager, round2 = report['results']
    assert round2['settings']['inputs_on_device'] is False
    assert round2['settings']['gelu_epilogue'] is False
    assert all(chunk['inputs'] > 0 for chunk in eager['chunks'])
    assert round2['action_diff']['max_abs'] == 0  # the same operations on the CPU
    agreement = report['inputs']['agreement']
    assert all(row['differing'] == 0 for row in agreement.values())  # host == "device" (CPU)
