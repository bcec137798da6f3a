# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Speed options of the engine: fast block runner, FP8 linears, compiled stages, kernel choice."""

import dataclasses
import importlib.util

from dit_support import run_call
import numpy as np
import pytest
import torch

from dreamzero_ros.engine import ConfigError, DreamZeroEngine, EngineConfig
from dreamzero_ros.engine.attention import attention_kernel, sdpa
from dreamzero_ros.engine.checkpoint import randomize_
from dreamzero_ros.engine.dit import CausalWanDiT, DiTConfig
from dreamzero_ros.engine.fast_blocks import AccelerationConfig, FastBlockRunner, fuse_qkv_
from dreamzero_ros.engine.fp8 import fp8_linear, quantize, quantize_weight
from dreamzero_ros.engine.synthetic_droid import random_observation

H, W = 4, 6
T = (H // 2) * (W // 2)


def make_dit(dtype=torch.float32, seed=0):
    config = dataclasses.replace(DiTConfig.tiny(), frame_seqlen=T)
    return randomize_(CausalWanDiT(config).to(dtype), seed).eval()


def call_inputs(dit, seed=1):
    """A new window's prefill and one denoising call's inputs (batch 2, as batched CFG)."""
    c = dit.config
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g).to(dit.dtype)

    context = dit.prepare_context(r(2, c.text_len, c.text_dim), r(2, 257, c.clip_dim))
    return {
        'context': context,
        'clean': (r(2, 16, 1, H, W), r(2, 20, 1, H, W)),
        'noisy': (r(2, 16, 2, H, W), r(2, 20, 2, H, W)),
        'timestep': torch.full((2, 2), 733),
        'action': r(2, c.num_action_per_block, c.action_dim),
        'timestep_action': torch.full((2, c.num_action_per_block), 733),
        'state': r(2, 1, c.max_state_dim),
    }


def rel(a, b):
    return float((a.float() - b.float()).norm() / b.float().norm())


def test_fast_runner_computes_the_reference_blocks():
    dit = make_dit()
    x = call_inputs(dit)
    ref, ref_cache = run_call(dit, x)
    runner = FastBlockRunner(dit, AccelerationConfig())
    fast, fast_cache = run_call(dit, x, runner)
    assert rel(fast.video, ref.video) < 1e-5 and rel(fast.action, ref.action) < 1e-5
    # The prefill's last block stops after caching: the cached keys/values are the same.
    assert fast_cache.length == ref_cache.length == T
    assert torch.allclose(fast_cache.k[:, :, :T], ref_cache.k[:, :, :T], atol=1e-6)
    assert torch.allclose(fast_cache.v[:, :, :T], ref_cache.v[:, :, :T], atol=1e-6)


def test_qkv_fusion_keeps_values_and_keys():
    dit = make_dit()
    attn = dit.blocks[0].self_attn
    before = {k: v.clone() for k, v in dit.state_dict().items()}
    weight, bias = fuse_qkv_(attn)
    assert fuse_qkv_(attn)[0] is weight  # idempotent
    assert attn.k.weight.data_ptr() == weight[attn.q.weight.shape[0] :].data_ptr()
    after = dit.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(after[k], before[k]) for k in before)
    # Loading new values into the views updates the fused matrix the fast runner uses.
    attn.v.weight.data.copy_(torch.ones_like(attn.v.weight))
    assert torch.equal(weight[-attn.v.weight.shape[0] :], torch.ones_like(attn.v.weight))


def test_compiled_stages_match_the_reference():
    dit = make_dit()
    x = call_inputs(dit)
    ref, _ = run_call(dit, x)
    runner = FastBlockRunner(dit, AccelerationConfig(compile='aot_eager'))
    fast, _ = run_call(dit, x, runner)
    assert rel(fast.video, ref.video) < 1e-5 and rel(fast.action, ref.action) < 1e-5


@pytest.mark.parametrize('mode', ['rowwise', 'tensorwise'])
def test_fp8_linear_is_close_to_the_exact_product(mode):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 40, 64, generator=g).to(torch.bfloat16)
    x[0, 0] *= 30  # an outlier row: rowwise scaling keeps the other rows accurate
    weight = (torch.randn(48, 64, generator=g) * 0.1).to(torch.bfloat16)
    bias = torch.randn(48, generator=g).to(torch.bfloat16)
    quantized = quantize_weight(weight, bias, mode)
    assert quantized.weight.dtype == torch.float8_e4m3fn
    assert quantized.scale.shape == ((1, 48) if mode == 'rowwise' else ())
    out = fp8_linear(x, *quantized.as_tuple())
    exact = x.double() @ weight.double().T + bias.double()
    assert out.shape == (3, 40, 48) and out.dtype == torch.bfloat16
    assert rel(out, exact) < 0.05
    assert rel(out[1:], exact[1:]) < (0.05 if mode == 'rowwise' else 0.2)


def test_quantize_round_trip_and_errors():
    x = torch.randn(8, 32)
    values, scale = quantize(x, rowwise=True)
    assert scale.shape == (8, 1)
    assert float(values.float().abs().max()) <= 448
    assert rel(values.float() * scale, x) < 0.05
    with pytest.raises(ValueError, match='multiples of 16'):
        quantize_weight(torch.randn(48, 20), None, 'rowwise')
    with pytest.raises(ValueError, match='fp8 scaling'):
        quantize_weight(torch.randn(48, 32), None, 'blockwise')


def test_fp8_runner_is_close_to_bf16():
    dit = make_dit(torch.bfloat16)
    x = call_inputs(dit)
    ref, _ = run_call(dit, x)
    fast, _ = run_call(dit, x, FastBlockRunner(dit, AccelerationConfig(fp8_linear=True)))
    assert 0 < rel(fast.video, ref.video) < 0.1
    assert rel(fast.action, ref.action) < 0.1


def test_runner_refuses_what_it_cannot_do():
    dit = make_dit()
    with pytest.raises(ValueError, match='bfloat16'):
        FastBlockRunner(dit, AccelerationConfig(fp8_linear='rowwise'))
    dit.tensor_parallel = (0, 2)
    with pytest.raises(ValueError, match='tensor-parallel'):
        FastBlockRunner(dit, AccelerationConfig(compile=True))


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
        EngineConfig.tiny(attention_backend='fa3')


def test_acceleration_settings_and_their_errors():
    assert not AccelerationConfig().fast_blocks
    assert AccelerationConfig(compile=True).compile_backend == 'inductor'
    assert AccelerationConfig(compile='off').compile_backend is None
    config = EngineConfig.tiny(fp8_linear=True, compile='aot_eager', attention_backend='flash')
    assert config.fp8_linear == 'rowwise'
    assert config.acceleration == AccelerationConfig('aot_eager', 'rowwise', 'flash')
    assert EngineConfig.tiny().acceleration == AccelerationConfig()
    with pytest.raises(ConfigError, match='bfloat16'):
        EngineConfig.tiny(dtype='float32', fp8_linear='rowwise')
    with pytest.raises(ConfigError, match='fp8_linear'):
        EngineConfig.tiny(fp8_linear='int4')
    with pytest.raises(ConfigError, match='attention_backend'):
        EngineConfig.tiny(attention_backend='fa4')


def test_engine_with_speed_options_predicts_like_the_reference():
    reference = DreamZeroEngine.from_config(EngineConfig.tiny(), seed=3)
    fast = DreamZeroEngine(
        EngineConfig.tiny(fp8_linear='rowwise', attention_backend='math'),
        reference.modules,
        reference.tokenizer,
        reference.normalizer,
    )
    assert fast.denoiser.runner is not None and reference.denoiser.runner is None
    for step in range(2):
        observation = random_observation(seed=step, session_id='s', stamp=step / 15)
        a = reference.infer(observation).actions
        b = fast.infer(observation).actions
        assert a.shape == b.shape == (24, 8)
        assert np.abs(a - b).max() < 0.05
