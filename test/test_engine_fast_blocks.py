# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The fast block processor computes the reference DiT blocks: eager, compiled and in FP8."""

from denoise_support import chunk_stream, run_chunks
from dit_support import T, call_inputs, fast_processors, make_dit, rel, run_call
import pytest
import torch
from torch._dynamo.utils import counters
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

from dreamzero_ros.engine.model.denoise import DenoiseConfig
from dreamzero_ros.engine.model.dit import REFERENCE_PROCESSOR
from dreamzero_ros.engine.speed import fast_blocks
from dreamzero_ros.engine.speed.acceleration import AccelerationConfig, block_processors
from dreamzero_ros.engine.speed.fast_blocks import FastStages, _linear_gelu, fuse_qkv_


@pytest.fixture(scope='module')
def dit():
    return make_dit()


def assert_same_call(a, b, tol=1e-6):
    (out_a, cache_a), (out_b, cache_b) = a, b
    torch.testing.assert_close(out_a.video, out_b.video, rtol=tol, atol=tol)
    torch.testing.assert_close(out_a.action, out_b.action, rtol=tol, atol=tol)
    assert cache_a.length == cache_b.length == T
    torch.testing.assert_close(cache_a.k[:, :, :T], cache_b.k[:, :, :T], rtol=tol, atol=tol)
    torch.testing.assert_close(cache_a.v[:, :, :T], cache_b.v[:, :, :T], rtol=tol, atol=tol)


@pytest.mark.parametrize('timesteps', ['uniform', 'per_token', 'mixed'])
def test_fast_processor_computes_the_reference_blocks(dit, timesteps):
    x = call_inputs(dit, timesteps)
    # The prefill's last block stops after caching: the cached keys/values are the same.
    assert_same_call(run_call(dit, x, fast_processors(dit)), run_call(dit, x), 1e-5)


@pytest.mark.parametrize('timesteps', ['uniform', 'per_token', 'mixed'])
def test_uniform_calls_broadcast_one_vector_per_token_kind(dit, timesteps, monkeypatch):
    x = call_inputs(dit, timesteps)
    shapes = []
    vectors = fast_blocks._token_vectors

    def spy(mod, segment, index, length):
        shapes.append((isinstance(segment, int), mod.shape[1]))
        return vectors(mod, segment, index, length)

    monkeypatch.setattr(fast_blocks, '_token_vectors', spy)
    run_call(dit, x, fast_processors(dit))
    # The prefill (all frames at t = 0) broadcasts one vector; a uniform denoising call two
    # (video, registers); per-frame / per-action timesteps gather one per frame and register.
    denoising = (True, 2) if timesteps == 'uniform' else (False, 27)
    assert set(shapes) == {(True, 1), denoising}


def test_timesteps_given_per_token_take_the_gather_even_when_equal(dit):
    uniform = run_call(dit, call_inputs(dit, 'uniform'), fast_processors(dit))
    per_token = run_call(dit, call_inputs(dit, 'per_token'), fast_processors(dit))
    assert_same_call(uniform, per_token)


def test_each_call_lays_out_its_tokens_once(dit, monkeypatch):
    seen = []
    original = FastStages.segment_index
    monkeypatch.setattr(
        FastStages, 'segment_index', lambda self, *a: seen.append(a) or original(self, *a)
    )
    run_call(dit, call_inputs(dit, 'per_token'), fast_processors(dit))
    assert seen == [(2, 2 * T + 25, 25)]  # the denoising call, once for both blocks


def test_qkv_fusion_keeps_values_and_keys():
    dit = make_dit()
    attn = dit.blocks[0].self_attn
    before = {k: v.clone() for k, v in dit.state_dict().items()}
    weight, scale, bias = fuse_qkv_(attn)
    assert scale is None
    assert fuse_qkv_(attn)[0] is weight  # idempotent
    assert attn.k.weight.data_ptr() == weight[attn.q.weight.shape[0] :].data_ptr()
    after = dit.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(after[k], before[k]) for k in before)
    # Loading new values into the views updates the fused matrix the fast processor uses.
    attn.v.weight.data.copy_(torch.ones_like(attn.v.weight))
    assert torch.equal(weight[-attn.v.weight.shape[0] :], torch.ones_like(attn.v.weight))


def test_compiled_stages_match_the_reference(dit):
    x = call_inputs(dit)
    assert_same_call(run_call(dit, x, fast_processors(dit, 'aot_eager')), run_call(dit, x), 1e-5)


def test_compiled_stages_write_kv_in_place_without_recompiling(dit):
    """Dynamo traces the cache writes; the cache slots move every call, the graphs do not."""
    torch._dynamo.reset()
    counters.clear()
    processors = fast_processors(dit, 'aot_eager')
    for seed in (1, 2):
        reference = run_call(dit, call_inputs(dit, seed=seed))
        assert_same_call(run_call(dit, call_inputs(dit, seed=seed), processors), reference, 1e-5)
    # 3 stages x (a prefill of 1 frame, a denoising call of 2 frames)
    assert counters['stats']['unique_graphs'] == 6


def test_compiled_chunks_keep_their_graphs_across_windows_and_conditional_calls(dit):
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


def test_fp8_processor_is_close_to_bf16():
    dit = make_dit(torch.bfloat16)
    x = call_inputs(dit)
    ref, _ = run_call(dit, x)
    fast, _ = run_call(dit, x, fast_processors(dit, fp8='rowwise'))
    assert 0 < rel(fast.video, ref.video) < 0.1
    assert rel(fast.action, ref.action) < 0.1


def test_processors_of_each_option():
    dit = make_dit()
    assert block_processors(dit, AccelerationConfig()) == [REFERENCE_PROCESSOR] * 2
    compiled = block_processors(dit, AccelerationConfig(compile='eager'))
    assert all(isinstance(p, fast_blocks.FastBlockProcessor) for p in compiled)
    assert compiled[0].stages is compiled[1].stages  # one compiled block, repeated
    with pytest.raises(ValueError, match='bfloat16'):
        block_processors(dit, AccelerationConfig(fp8_linear='rowwise'))


def test_cpu_without_the_triton_interpreter_keeps_the_torch_path(dit):
    assert not any(p.qk_kernel for p in fast_processors(dit))


def _traced_ops(fn, *shapes, device='cuda'):
    with FakeTensorMode():
        tensors = [torch.empty(*s, device=device, dtype=torch.bfloat16) for s in shapes]
        graph = make_fx(fn)(*tensors)
    return [str(node.target) for node in graph.graph.nodes if node.op == 'call_function']


def test_gelu_is_in_the_ffn_product_epilogue_on_cuda_only():
    shapes = ((2, 5, 16), (32, 16), (32,))
    on_cuda = _traced_ops(lambda x, w, b: _linear_gelu(x, (w, None, b)), *shapes)
    assert 'aten._addmm_activation.default' in on_cuda and 'aten.gelu.default' not in on_cuda
    # The CPU's _addmm_activation applies the erf GELU, so the CPU keeps the separate kernels.
    on_cpu = _traced_ops(lambda x, w, b: _linear_gelu(x, (w, None, b)), *shapes, device='cpu')
    assert 'aten.gelu.default' in on_cpu and 'aten._addmm_activation.default' not in on_cpu


def test_cuda_addmm_activation_is_the_tanh_gelu():
    """The reference decomposition of the op: on CUDA tensors, gelu(approximate='tanh')."""
    from torch._decomp import decomposition_table

    decomposition = decomposition_table[torch.ops.aten._addmm_activation.default]
    with FakeTensorMode():
        b, x, w = (torch.empty(*s, device='cuda') for s in ((32,), (5, 16), (16, 32)))
        graph = make_fx(lambda b, x, w: decomposition(b, x, w, use_gelu=True))(b, x, w)
    gelus = [n for n in graph.graph.nodes if n.target == torch.ops.aten.gelu.default]
    assert len(gelus) == 1 and gelus[0].kwargs.get('approximate') == 'tanh'
