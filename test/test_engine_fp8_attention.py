# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""FP8 attention over the FP8 K/V cache: the Triton kernel's semantics, its op, its refusals.

The kernel runs under Triton's CPU interpreter here (a subprocess: Triton reads
``TRITON_INTERPRET`` when the kernel is defined); the interpreter converts to FP8 wrongly, so
there the kernel rounds to e4m3 in float32 (the same values).  On the GPU the benchmark's
``--fp8-attention`` measures the error against the bf16 path.
"""

import json
import os
from pathlib import Path
import re
import subprocess
import sys

import pytest
import torch

from dreamzero_ros.engine.memory.estimate import estimate_memory
from dreamzero_ros.engine.memory.options import MemoryConfig
from dreamzero_ros.engine.model.attention import attention_kernel
from dreamzero_ros.engine.model.config import EngineConfig
from dreamzero_ros.engine.model.kv_cache import Fp8KVCache
from dreamzero_ros.engine.speed import fp8_attention_kernel
from dreamzero_ros.engine.speed.acceleration import AccelerationConfig
from dreamzero_ros.engine.speed.fp8_attention_kernel import KernelConfig, fp8_kv_attention
from dreamzero_ros.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope='module')
def interpreted():
    """The checks of ``fp8_attention_support.py``, run under the Triton interpreter."""
    pytest.importorskip('triton')
    result = subprocess.run(
        [sys.executable, str(ROOT / 'test' / 'fp8_attention_support.py')],
        env={**os.environ, 'TRITON_INTERPRET': '1'},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize('cached', [0, 40])
def test_kernel_with_bf16_pv_is_the_attention_of_its_quantized_operands(interpreted, cached):
    # Q per token and head, the new K/V per token and head (as the cache stores them), the
    # cache as stored; what is left is P and the output in bfloat16.
    checks = interpreted[f'{cached}-bf16']
    assert checks['shape'] == [2, 35, 3, 32] and checks['dtype'] == 'torch.bfloat16'
    assert checks['vs_quantized']['rms'] < 0.01
    assert checks['vs_quantized']['max_abs'] < 0.01


def test_kernel_with_new_tokens_in_bf16_quantizes_only_q_for_the_cache(interpreted):
    checks = interpreted['40-bf16-new-bf16']
    assert checks['vs_quantized']['rms'] < 0.01
    assert checks['vs_quantized']['max_abs'] < 0.01
    # the new tokens attended exactly: closer to the dequantizing path than with them in FP8
    assert checks['vs_dequantized']['rms'] < interpreted['40-bf16']['vs_dequantized']['rms']


def test_kernel_with_fp8_pv_adds_only_the_rounding_of_p(interpreted):
    checks = interpreted['40-fp8']
    assert checks['vs_quantized']['rms'] < 0.04
    assert checks['vs_quantized']['max_abs'] < 0.05


def test_transposed_v_kernel_with_bf16_pv_computes_what_the_token_major_kernel_does(interpreted):
    checks, token_major = interpreted['vt-40-bf16-new-bf16'], interpreted['40-bf16-new-bf16']
    assert checks['shape'] == [2, 35, 3, 32] and checks['dtype'] == 'torch.bfloat16'
    assert checks['vs_quantized']['rms'] < 0.01
    assert checks['vs_quantized']['max_abs'] < 0.01
    assert abs(checks['vs_dequantized']['rms'] - token_major['vs_dequantized']['rms']) < 1e-3


@pytest.mark.parametrize(
    'case',
    ['vt-40-fp8-new-bf16', 'vt-40-fp8-new-fp8', 'vt-0-fp8-new-fp8', 'vt-40-fp8-new-fp8-exp16'],
)
def test_transposed_v_kernel_with_fp8_pv_adds_only_the_rounding_of_p(interpreted, case):
    # (with TMA descriptor loads and a warp-specialised loop in 40-fp8-new-fp8)
    checks = interpreted[case]
    assert checks['vs_quantized']['rms'] < 0.04
    assert checks['vs_quantized']['max_abs'] < 0.05


@pytest.mark.parametrize(
    'case',
    [
        'vt-40-fp8x2-new-bf16',
        'vt-40-fp8x2-new-fp8',
        'vt-40-fp8x2-new-fp8-exp16',
        'vt-40-fp8x2-new-sdpa',
        'vt-0-fp8x2-new-sdpa',
    ],
)
def test_fp8_pv_in_two_terms_is_as_exact_as_bf16_pv(interpreted, case):
    checks = interpreted[case]
    assert checks['vs_quantized']['rms'] < 0.01
    assert checks['vs_quantized']['max_abs'] < 0.01


def test_new_tokens_are_quantized_as_the_cache_quantizes_them(interpreted):
    assert interpreted['quantize'] == {'token_major': True, 'transposed': True}


@pytest.mark.parametrize(
    'case',
    ['0-bf16', '40-bf16', '40-fp8', '40-bf16-new-bf16', 'vt-40-bf16-new-bf16',
     'vt-40-fp8-new-bf16', 'vt-40-fp8x2-new-bf16', 'vt-0-fp8-new-fp8', 'vt-40-fp8-new-fp8',
     'vt-40-fp8x2-new-fp8', 'vt-40-fp8-new-fp8-exp16', 'vt-40-fp8x2-new-fp8-exp16',
     'vt-40-fp8x2-new-sdpa', 'vt-0-fp8x2-new-sdpa'],
)  # fmt: skip
def test_kernel_stays_near_the_dequantizing_path(interpreted, case):
    # Random operands with peaked scores: the rounding of Q (e4m3) dominates; the model's
    # figures are measured on the GPU.
    checks = interpreted[case]
    assert checks['vs_dequantized']['rms'] < 0.07
    assert checks['vs_dequantized']['max_abs'] < 0.15


def _compile_for_hopper(config: KernelConfig) -> str:
    """The transposed-V kernel compiled ahead of time for sm_90 (no GPU needed): its PTX."""
    triton = pytest.importorskip('triton')
    compiler = pytest.importorskip('triton.compiler')
    backends = pytest.importorskip('triton.backends.compiler')
    kernel = fp8_attention_kernel._vt_attention_kernel
    new = '*fp8e4nv' if config.new_fp8 else '*bf16'
    pointers = {'kc_ptr': '*fp8e4nv', 'vtc_ptr': '*fp8e4nv', 'kn_ptr': new, 'vn_ptr': new}
    pointers['lse_ptr'] = '*fp32'
    constants = {
        'head_dim': 128, 'block_d': 128, 'block_m': config.block_m, 'block_n': config.block_n,
        'pv_fp8': config.pv_fp8, 'pv_split': config.pv_split, 'new_fp8': config.new_fp8,
        'tma': config.tma, 'warp_specialize': config.warp_specialize,
        'exp_fp16': config.exp_fp16, 'has_init': bool(config.new_sdpa), 'emulate': False,
    }  # fmt: skip
    signature = {
        name: 'constexpr' if name in constants
        else pointers.get(name, '*bf16') if name.endswith('_ptr')
        else 'fp32' if name == 'qk_scale'
        else 'i32'
        for name in kernel.arg_names
    }  # fmt: skip
    source = compiler.ASTSource(
        kernel,
        signature,
        constexprs={(kernel.arg_names.index(k),): v for k, v in constants.items()},
    )
    options = {'num_warps': config.num_warps, 'num_stages': config.num_stages}
    compiled = triton.compile(source, target=backends.GPUTarget('cuda', 90, 32), options=options)
    return compiled.asm['ptx']


@pytest.mark.parametrize(
    ('config', 'products'),
    [
        (KernelConfig(128, 128, 8, 3, pv_fp8=True, new_fp8=True, transposed_v=True, tma=True,
                      warp_specialize=True), {'e4m3.e4m3'}),
        (KernelConfig(128, 128, 8, 3, pv_fp8=True, pv_split=True, new_fp8=True,
                      transposed_v=True, tma=True, exp_fp16=True), {'e4m3.e4m3'}),
        (KernelConfig(128, 64, 8, 3, transposed_v=True, tma=True), {'e4m3.e4m3', 'bf16.bf16'}),
        (KernelConfig(64, 128, 4, 3, pv_fp8=True, pv_split=True, transposed_v=True, tma=True,
                      exp_fp16=True, new_sdpa='cudnn'), {'e4m3.e4m3'}),
    ],
)  # fmt: skip
def test_transposed_v_kernel_compiles_for_hopper_with_fp8_tensor_core_products(config, products):
    # FP8 P V: every product on FP8 tensor cores (wgmma e4m3); bf16 P V and new tokens: Q K^T
    # over the cache in FP8, the rest in bf16.  Keys and values through TMA.
    ptx = _compile_for_hopper(config)
    assert (
        set(re.findall(r'wgmma\.mma_async\.sync\.aligned\.\w+\.f32\.(\w+\.\w+)', ptx)) == products
    )
    assert 'cp.async.bulk.tensor' in ptx
    assert ('ex2.approx.f16x2' in ptx) == config.exp_fp16


def _operands(cached: int = 6, new: int = 5) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, new, 3, 16, generator=g).bfloat16()
    k8, v8 = torch.randn(2, 2, cached, 3, 16, generator=g).to(torch.float8_e4m3fn)
    scales = (0.01 + torch.rand(2, 2, cached, 3, 1, generator=g)).bfloat16()
    k_new, v_new = torch.randn(2, 2, new, 3, 16, generator=g).bfloat16()
    return q, k8, v8, scales[0], scales[1], k_new, v_new


def test_op_is_registered_with_a_fake_that_compile_treats_as_one_call():
    operands = _operands()
    # (opcheck's schema test multiplies the inputs, which torch has no CPU kernel for in e4m3.)
    for extra in ((), (fp8_attention_kernel.transposed_v(operands[2]),)):  # v_cached_t or not
        torch.library.opcheck(
            torch.ops.dreamzero.fp8_kv_attention.default,
            (*operands, *extra),
            test_utils=('test_faketensor', 'test_aot_dispatch_dynamic'),
        )
    graphs = []

    def backend(graph, example_inputs):
        graphs.append(graph)
        return graph.forward

    compiled = torch.compile(lambda *t: fp8_kv_attention(*t) * 2, backend=backend, fullgraph=True)
    out = compiled(*operands)
    calls = [n for g in graphs for n in g.graph.nodes if n.op == 'call_function']
    assert [str(n.target) for n in calls].count('dreamzero.fp8_kv_attention.default') == 1
    assert out.shape == operands[0].shape


def test_op_without_the_kernel_computes_the_dequantized_reference():
    q, k8, v8, ks, vs, k_new, v_new = _operands()
    out = fp8_kv_attention(q, k8, v8, ks, vs, k_new, v_new)
    k = torch.cat([(k8.float() * ks.float()).bfloat16(), k_new], dim=1).transpose(1, 2)
    v = torch.cat([(v8.float() * vs.float()).bfloat16(), v_new], dim=1).transpose(1, 2)
    ref = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k, v)
    assert torch.equal(out, ref.transpose(1, 2))


def test_fp8_attention_is_refused_at_configure_without_an_fp8_kv_cache():
    with pytest.raises(ConfigError, match="needs kv_cache 'fp8', not 'model'"):
        EngineConfig.tiny(acceleration=AccelerationConfig(attention_backend='fp8'))


def test_fp8_attention_is_refused_at_configure_on_a_device_without_fp8_tensor_cores(
    monkeypatch,
):
    acceleration = AccelerationConfig(attention_backend='fp8')
    memory = MemoryConfig(kv_cache='fp8')
    with pytest.raises(ConfigError, match="'fp8' needs a CUDA GPU with FP8 tensor cores"):
        EngineConfig.tiny(acceleration=acceleration, memory=memory)
    # An Ampere GPU (8.0): no FP8 tensor cores.
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'get_device_capability', lambda device=None: (8, 0))
    with pytest.raises(ConfigError, match='compute capability 8.9 or newer.*has 8.0'):
        EngineConfig.tiny(acceleration=acceleration, memory=memory, device='cuda')
    monkeypatch.setattr(fp8_attention_kernel, 'triton', None)
    with pytest.raises(ConfigError, match="'fp8' needs Triton"):
        EngineConfig.tiny(acceleration=acceleration, memory=memory, device='cuda')


@pytest.fixture
def transposed_v():
    """The kernel that reads V token-contiguous selected (as a benchmark does), then the former."""
    initial = fp8_attention_kernel.kernel_config()
    fp8_attention_kernel.kernel_config(KernelConfig(transposed_v=True))
    yield
    fp8_attention_kernel.kernel_config(initial)


def _hopper_cache(monkeypatch) -> tuple[EngineConfig, Fp8KVCache]:
    """A configuration with FP8 attention on a Hopper GPU (9.0) and its cache (meta device)."""
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'get_device_capability', lambda device=None: (9, 0))
    config = EngineConfig.tiny(
        acceleration=AccelerationConfig(attention_backend='fp8'),
        memory=MemoryConfig(kv_cache='fp8'),
        device='cuda',
    )
    c = config.dit
    with attention_kernel('fp8'):
        cache = Fp8KVCache(c.num_layers, 2, c.num_heads, c.head_dim, c.max_attention_tokens,
                           c.register_tokens, torch.bfloat16, 'meta')  # fmt: skip
    return config, cache


def _cache_bytes(cache: Fp8KVCache) -> int:
    tensors = [t for t in vars(cache).values() if isinstance(t, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors)


def test_fp8_attention_on_an_fp8_gpu_is_accepted_and_its_memory_estimated(monkeypatch):
    # The estimate builds the model on the meta device, where nothing runs.
    config, cache = _hopper_cache(monkeypatch)
    assert estimate_memory(config, 2).total > 0
    # The default kernel reads the store as it is: no token-contiguous copy, nothing counted.
    assert cache.vt8 is None
    kv_only = EngineConfig.tiny(memory=MemoryConfig(kv_cache='fp8'), device='cuda')
    kv_cache = estimate_memory(config, 2).kv_cache
    assert kv_cache == estimate_memory(kv_only, 2).kv_cache == _cache_bytes(cache)


def test_the_transposed_v_kernel_adds_the_token_contiguous_values_to_the_estimate(
    monkeypatch, transposed_v
):
    config, cache = _hopper_cache(monkeypatch)
    # one byte per value more than kv_cache fp8 alone: the cache's token-contiguous values
    kv_only = EngineConfig.tiny(memory=MemoryConfig(kv_cache='fp8'), device='cuda')
    extra = estimate_memory(config, 2).kv_cache - estimate_memory(kv_only, 2).kv_cache
    assert extra == cache.vt8.numel() > 0
    assert estimate_memory(config, 2).kv_cache == _cache_bytes(cache)


def _prefill(cache: Fp8KVCache, g: torch.Generator, tokens: int = 4) -> None:
    cache.begin(tokens, 0)
    for layer in range(2):
        cache.store(layer, *(torch.randn(2, tokens, 2, 16, generator=g).bfloat16() for _ in 'kv'))
    cache.commit()


def _assert_transposed(cache: Fp8KVCache) -> None:
    cached = cache.length
    assert cache.vt8.stride(-1) == 1 and cache.vt8.shape[-1] % 16 == 0
    expected = cache.v8[:, :, :cached].permute(0, 1, 3, 4, 2).float()
    assert torch.equal(cache.vt8[..., :cached].float(), expected)


def test_the_transposed_v_kernel_keeps_the_cached_values_token_contiguous_too(transposed_v):
    g = torch.Generator().manual_seed(0)
    geometry = (2, 2, 2, 16, 6, 2, torch.bfloat16, 'cpu')
    with attention_kernel('fp8'):
        cache = Fp8KVCache(*geometry)  # built for FP8 attention: the copy is allocated with it
        assert cache.vt8.shape == (2, 2, 2, 16, 16)
        for _ in range(2):  # two prefills of 4 tokens: the window drops the 2 oldest
            _prefill(cache, g)
        assert cache.length == 6
        _assert_transposed(cache)
        view = cache.rows(1)
        assert view.vt8.data_ptr() == cache.vt8.data_ptr() and view.vt8.shape[1] == 1
        view.begin(0, 2)
        q, k, v = (torch.randn(1, 2, 2, 16, generator=g).bfloat16() for _ in 'qkv')
        assert view.attend(0, q, k, v).shape == (1, 2, 2, 16)
    lazy = Fp8KVCache(*geometry)  # built outside: made from the store on first use
    _prefill(lazy, g)
    assert lazy.vt8 is None
    with attention_kernel('fp8'):
        lazy.rows(2)
    _assert_transposed(lazy)
    _prefill(lazy, g)  # written with the store from then on
    _assert_transposed(lazy)


def test_token_contiguous_values_exist_only_while_the_kernel_that_reads_them_is_selected():
    g = torch.Generator().manual_seed(0)
    cache = Fp8KVCache(2, 2, 2, 16, 6, 2, torch.bfloat16, 'cpu')
    with attention_kernel('fp8'):  # the default kernel reads the store as it is
        assert cache.vt8 is None
        _prefill(cache, g)
        cache.begin(0, 2)
        assert cache.vt8 is None and cache.layer(0).v_fp8_t is None
        initial = fp8_attention_kernel.kernel_config()
        try:
            fp8_attention_kernel.kernel_config(KernelConfig(transposed_v=True))
            cache.begin(0, 2)
            assert cache.layer(1).v_fp8_t.shape == (2, 2, 16, 4)  # made from the store
            _assert_transposed(cache)
            _prefill(cache, g)  # written with the store from then on
            _assert_transposed(cache)
        finally:
            fp8_attention_kernel.kernel_config(initial)
        _prefill(cache, g)  # the default kernel again: dropped
        assert cache.vt8 is None and cache.layer(0).v_fp8_t is None


def test_a_nested_attention_context_replaces_the_fp8_choice():
    from dreamzero_ros.engine.model.attention import attention_kernel, fp8_kv_attention_active

    assert not fp8_kv_attention_active()
    with attention_kernel('fp8'):
        assert fp8_kv_attention_active()
        with attention_kernel('cudnn'):
            assert not fp8_kv_attention_active()
        with attention_kernel('auto'):
            assert not fp8_kv_attention_active()
        assert fp8_kv_attention_active()
    assert not fp8_kv_attention_active()
