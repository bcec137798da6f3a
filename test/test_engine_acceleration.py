# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Speed options a user sets: validated, applied from outside the model, same predictions."""

import importlib.util

import numpy as np
import pytest
import torch

from dreamzero_ros.engine import ConfigError, DreamZeroEngine, EngineConfig
from dreamzero_ros.engine.checkpoint.synthetic_droid import random_observation
from dreamzero_ros.engine.networks.attention import attention_kernel, sdpa
from dreamzero_ros.engine.networks.fp8 import Fp8Linear
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.engine.speed.acceleration import VAEEncoding, held_fp8_mode, prepare_blocks


def tiny(**options) -> EngineConfig:
    """The tiny preset in bfloat16 on the CPU with ``options``."""
    return EngineConfig.tiny(options=EngineOptions(device='cpu', dtype='bfloat16', **options))


def test_attention_kernel_choice():
    q, k, v = (torch.randn(1, 7, 2, 16) for _ in range(3))
    reference = sdpa(q, k, v)
    for name in ('auto', 'cudnn', 'flash', 'efficient', 'math'):
        with attention_kernel(name):  # on the CPU every choice falls back to a CPU kernel
            assert torch.allclose(sdpa(q, k, v), reference, atol=1e-5)
    with pytest.raises(ValueError, match='attention backend'):
        attention_kernel('fa4')


@pytest.mark.skipif(
    importlib.util.find_spec('flash_attn_3') is not None, reason='FlashAttention-3 is installed'
)
def test_fa3_backend_is_refused_with_what_to_install_when_missing():
    with pytest.raises(RuntimeError, match="'fa3' needs FlashAttention-3: the flash_attn_3"):
        attention_kernel('fa3').__enter__()
    with pytest.raises(ConfigError, match='hopper/ folder'):
        tiny(attention_backend='fa3')


def test_speed_options_and_their_errors():
    config = tiny(compile=True, fp8_linear='rowwise', attention_backend='flash')
    assert config.options.compile and config.compile_backend == 'inductor'
    assert config.options is config.replace(max_sessions=2).options  # held whole, not copied
    with pytest.raises(ConfigError, match='bfloat16'):
        EngineConfig.tiny(options=EngineOptions(dtype='float32', fp8_linear='rowwise'))
    with pytest.raises(ConfigError, match='options must be EngineOptions'):
        EngineConfig.tiny(options={'compile': True})


def test_vae_encoding_follows_compile_on_cuda():
    cpu, cuda = torch.device('cpu'), torch.device('cuda')
    compiled = EngineOptions(compile=True)
    assert VAEEncoding.for_engine(EngineOptions(), cuda, 'inductor') == VAEEncoding()
    assert VAEEncoding.for_engine(compiled, cpu, 'inductor') == VAEEncoding()
    on_gpu = VAEEncoding.for_engine(compiled, cuda, 'inductor')
    assert on_gpu == VAEEncoding(channels_last=True, compile_backend='inductor')


def test_engine_with_speed_options_predicts_like_the_reference():
    reference = DreamZeroEngine.from_config(tiny(), seed=3)
    compiled = DreamZeroEngine(
        tiny(compile=True).replace(compile_backend='eager'),
        reference.modules,
        reference.tokenizer,
        reference.embodiment,
    )
    fp8 = DreamZeroEngine.from_config(tiny(fp8_linear='rowwise'), seed=3)
    assert all(callable(call) for call in compiled.denoiser.block_runs.calls)
    assert reference.denoiser.block_runs.calls == (None, None)
    for step in range(2):
        observation = random_observation(seed=step, session_id='s', stamp=step / 15)
        # Each engine installs how its blocks run on the shared DiT before a chunk.
        a = reference.infer(observation).actions
        assert all(b._compiled_call_impl is None for b in reference.modules.dit.blocks)
        b = compiled.infer(observation).actions
        calls = compiled.denoiser.block_runs.calls
        assert [b._compiled_call_impl for b in compiled.modules.dit.blocks] == list(calls)
        c = fp8.infer(observation).actions
        assert a.shape == b.shape == c.shape == (24, 8)
        np.testing.assert_allclose(a, b, atol=1e-5)
        assert 0 < np.abs(a - c).max() < 0.05  # FP8 rounding, not another model


def test_fp8_weights_are_held_instead_of_the_model_dtype_ones():
    bf16 = DreamZeroEngine.from_config(tiny(), seed=3)
    fp8_config = tiny(fp8_linear='rowwise')
    fp8 = DreamZeroEngine.from_config(fp8_config, seed=3)
    block_bytes = [
        sum(p.numel() * p.element_size() for p in engine.modules.dit.blocks.parameters())
        for engine in (bf16, fp8)
    ]
    assert block_bytes[1] < 0.6 * block_bytes[0]
    assert held_fp8_mode(fp8.modules.dit) == 'rowwise' and held_fp8_mode(bf16.modules.dit) == 'off'
    # The same draws as the bf16 model, quantized: within FP8 rounding of it.
    for name, layer in fp8.modules.dit.named_modules():
        if isinstance(layer, Fp8Linear):
            exact = bf16.modules.dit.get_submodule(name).weight.float()
            assert (layer.weight.float() * layer.scale.T - exact).abs().max() <= (
                exact.abs().amax(dim=1, keepdim=True) / 16 + 1e-6
            ).max()
    # An engine sharing a bf16 DiT with fp8_linear quantizes it in place (no second copy) ...
    DreamZeroEngine(fp8_config, bf16.modules, bf16.tokenizer, bf16.embodiment)
    assert held_fp8_mode(bf16.modules.dit) == 'rowwise'
    # ... after which a model-dtype engine on it is refused.
    with pytest.raises(ConfigError, match='holds its block linears in rowwise FP8'):
        DreamZeroEngine(tiny(), bf16.modules, bf16.tokenizer, bf16.embodiment)
    with pytest.raises(ConfigError, match='tensorwise'):
        prepare_blocks(fp8.modules.dit, EngineOptions(fp8_linear='tensorwise'), 'inductor')
