# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Speed options a user sets: validated, applied from outside the model, same predictions."""

import importlib.util

import numpy as np
import pytest
import torch

from dreamzero_ros.engine import ConfigError, DreamZeroEngine, EngineConfig
from dreamzero_ros.engine.acceleration import AccelerationConfig, VAEEncoding
from dreamzero_ros.engine.attention import attention_kernel, sdpa
from dreamzero_ros.engine.dit import REFERENCE_PROCESSOR
from dreamzero_ros.engine.fast_blocks import FastBlockProcessor
from dreamzero_ros.engine.synthetic_droid import random_observation


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
        AccelerationConfig(attention_backend='fa3')


def test_acceleration_settings_and_their_errors():
    assert not AccelerationConfig().fast_blocks
    assert AccelerationConfig(compile=True).compile_backend == 'inductor'
    assert AccelerationConfig(compile='off').compile_backend is None
    assert AccelerationConfig(fp8_linear=True).fp8_linear == 'rowwise'
    config = EngineConfig.tiny(acceleration=AccelerationConfig('aot_eager', 'rowwise', 'flash'))
    assert config.acceleration.fast_blocks
    assert EngineConfig.tiny().acceleration == AccelerationConfig()
    with pytest.raises(ConfigError, match='bfloat16'):
        EngineConfig.tiny(dtype='float32', acceleration=AccelerationConfig(fp8_linear='rowwise'))
    with pytest.raises(ConfigError, match='fp8_linear'):
        AccelerationConfig(fp8_linear='int4')
    with pytest.raises(ConfigError, match='attention_backend'):
        AccelerationConfig(attention_backend='fa4')
    with pytest.raises(ConfigError, match='AccelerationConfig'):
        EngineConfig.tiny(acceleration={'compile': True})


def test_vae_encoding_follows_compile_on_cuda():
    cpu, cuda = torch.device('cpu'), torch.device('cuda')
    assert VAEEncoding.for_engine(AccelerationConfig(), cuda) == VAEEncoding()
    assert VAEEncoding.for_engine(AccelerationConfig(compile=True), cpu) == VAEEncoding()
    on_gpu = VAEEncoding.for_engine(AccelerationConfig(compile=True), cuda)
    assert on_gpu == VAEEncoding(channels_last=True, compile_backend='inductor')


def test_engine_with_speed_options_predicts_like_the_reference():
    reference = DreamZeroEngine.from_config(EngineConfig.tiny(), seed=3)
    fast = DreamZeroEngine(
        EngineConfig.tiny(acceleration=AccelerationConfig(fp8_linear='rowwise')),
        reference.modules,
        reference.tokenizer,
        reference.embodiment,
    )
    assert all(isinstance(p, FastBlockProcessor) for p in fast.denoiser.block_processors)
    assert reference.denoiser.block_processors == [REFERENCE_PROCESSOR] * 2
    for step in range(2):
        observation = random_observation(seed=step, session_id='s', stamp=step / 15)
        # Each engine installs its own processors on the shared DiT before a chunk.
        a = reference.infer(observation).actions
        assert all(b.processor is REFERENCE_PROCESSOR for b in reference.modules.dit.blocks)
        b = fast.infer(observation).actions
        assert all(isinstance(b.processor, FastBlockProcessor) for b in fast.modules.dit.blocks)
        assert a.shape == b.shape == (24, 8)
        assert 0 < np.abs(a - b).max() < 0.05  # FP8 rounding, not another model
