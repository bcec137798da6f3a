# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The reference DiT block, transformed and compiled, computes the reference: eager, compiled, FP8.

The block's code is the reference's; speed comes from module transforms (fused q/k/v, FP8
linears, the GELU epilogue) and ``torch.compile`` of each block as written, attention an op.
"""

import copy

from denoise_support import chunk_stream, run_chunks
from dit_support import T, call_inputs, eager, make_dit, rel, run_call, transformed
import pytest
import torch
from torch._dynamo.utils import counters
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

from dreamzero_ros.engine.networks.attention import attention
from dreamzero_ros.engine.networks.dit_block import Modulation, SelfAttention
from dreamzero_ros.engine.networks.fp8 import FP8_DTYPE
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.engine.speed.acceleration import prepare_blocks
from dreamzero_ros.engine.speed.block_transforms import (
    FusedQKVSelfAttention,
    TanhGeluFFN,
    fuse_qkv_,
)


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
def test_transformed_blocks_compute_the_reference_blocks(dit, timesteps):
    x = call_inputs(dit, timesteps)
    fused = copy.deepcopy(dit)
    runs = transformed(fused)
    assert all(isinstance(b.self_attn, FusedQKVSelfAttention) for b in fused.blocks)
    assert all(isinstance(b.ffn, TanhGeluFFN) for b in fused.blocks)
    # The prefill's last block stops after caching: the cached keys/values are the same.
    assert_same_call(run_call(fused, x, runs), run_call(dit, x), 1e-5)


@pytest.mark.parametrize('timesteps', ['uniform', 'per_token', 'mixed'])
def test_uniform_calls_broadcast_one_vector_per_token_kind(dit, timesteps, monkeypatch):
    x = call_inputs(dit, timesteps)
    shapes = []
    per_token = Modulation.per_token

    def spy(self, vectors, tokens):
        out = per_token(self, vectors, tokens)
        shapes.append((self.uniform, vectors.shape[1], out.shape[1]))
        return out

    monkeypatch.setattr(Modulation, 'per_token', spy)
    run_call(dit, x)
    # The prefill (all frames at t = 0) broadcasts one vector; a uniform denoising call two
    # (video, registers) by position; per-frame / per-action timesteps gather one per token.
    denoising = (True, 27, 2 * T + 25) if timesteps == 'uniform' else (False, 27, 2 * T + 25)
    assert set(shapes) == {(True, 1, 1), denoising}


def test_timesteps_given_per_token_equal_uniform_ones(dit):
    assert_same_call(run_call(dit, call_inputs(dit, 'uniform')),
                     run_call(dit, call_inputs(dit, 'per_token')))  # fmt: skip


def test_qkv_fusion_keeps_values_and_keys():
    dit = make_dit()
    attn = dit.blocks[0].self_attn
    before = {k: v.clone() for k, v in dit.state_dict().items()}
    fuse_qkv_(attn)
    weight = attn.qkv_weight
    assert isinstance(attn, FusedQKVSelfAttention) and attn.qkv_scale is None
    assert fuse_qkv_(attn).qkv_weight is weight  # idempotent
    assert attn.k.weight.data_ptr() == weight[attn.q.weight.shape[0] :].data_ptr()
    after = dit.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(after[k], before[k]) for k in before)
    # Loading new values into the views updates the fused matrix the block uses.
    attn.v.weight.data.copy_(torch.ones_like(attn.v.weight))
    assert torch.equal(weight[-attn.v.weight.shape[0] :], torch.ones_like(attn.v.weight))


def test_compiled_block_matches_the_reference(dit):
    x = call_inputs(dit)
    model = copy.deepcopy(dit)
    assert_same_call(run_call(model, x, transformed(model, 'aot_eager')), run_call(dit, x), 1e-5)


def test_inductor_compiled_block_matches_the_eager_block(dit):
    """The CPU's inductor compiles the block as written (no graph break: fullgraph)."""
    x = call_inputs(dit)
    model = copy.deepcopy(dit)
    eager = run_call(model, x, transformed(model))
    assert_same_call(run_call(model, x, transformed(model, 'inductor')), eager, 1e-5)


def test_the_block_is_one_graph_without_breaks(dit):
    model = copy.deepcopy(dit)
    transformed(model)
    x = call_inputs(dit)
    cache = model.new_cache(2)
    cache.begin(T, 0)
    c = model.config
    _, e0 = model.time_embeddings(torch.zeros(2, 1, dtype=torch.int64))
    rotary = model.rotary(0, (1, 2, 3), registers=False)
    tokens = torch.randn(2, T, c.dim)
    block = model.blocks[0]
    explanation = torch._dynamo.explain(block)(
        tokens, Modulation(e0, 1, True), rotary, x['context'].layers[0], cache.layer(0)
    )
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0
    ops = [str(n.target) for g in explanation.graphs for n in g.graph.nodes]
    # self-attention over the cache window; cross-attention over the text, then the image
    assert ops.count('dreamzero.attention.default') == 3


def test_compiled_block_writes_kv_in_place_without_recompiling(dit):
    """One graph per call shape for both blocks; the cache window moves, the graphs do not."""
    torch._dynamo.reset()
    counters.clear()
    model = copy.deepcopy(dit)
    runs = transformed(model, 'aot_eager')
    for seed in (1, 2):
        reference = run_call(dit, call_inputs(dit, seed=seed))
        assert_same_call(run_call(model, call_inputs(dit, seed=seed), runs), reference, 1e-5)
    # a prefill of 1 frame (the first block: the last one only writes its keys and values),
    # a denoising call of 2 frames
    assert counters['stats']['unique_graphs'] == 2


def test_compiled_chunks_keep_their_graphs_across_windows_and_conditional_calls(dit):
    torch._dynamo.reset()
    counters.clear()
    model = copy.deepcopy(dit)
    eager = run_chunks(dit, chunk_stream(5, need_video=False))
    config = {'options': EngineOptions(compile=True), 'compile_backend': 'aot_eager'}
    compiled = run_chunks(model, chunk_stream(5, need_video=False), **config)
    # prefill of 1 frame (empty cache) and of 2 frames, denoising calls of 2 rows and of 1 row;
    # the window's cache length is dynamic (the 4th chunk fills the cache: no new graph)
    assert counters['stats']['unique_graphs'] == 4
    again = run_chunks(model, chunk_stream(5, need_video=False, seed=4), **config)
    assert counters['stats']['unique_graphs'] == 4
    for a, b in zip(compiled, eager, strict=True):
        torch.testing.assert_close(a.actions, b.actions, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(again[0].actions, compiled[0].actions)


def test_fp8_blocks_are_close_to_bf16():
    dit = make_dit(torch.bfloat16)
    x = call_inputs(dit)
    ref, _ = run_call(dit, x)
    runs = transformed(dit, fp8='rowwise')
    assert dit.blocks[0].self_attn.qkv_weight.dtype == FP8_DTYPE
    fast, _ = run_call(dit, x, runs)
    assert 0 < rel(fast.video, ref.video) < 0.1
    assert rel(fast.action, ref.action) < 0.1


def test_blocks_of_each_option():
    dit = make_dit()
    assert prepare_blocks(dit, EngineOptions(), 'eager').calls == (None, None)
    assert type(dit.blocks[0].self_attn) is SelfAttention  # the reference: no transform
    compiled = prepare_blocks(dit, EngineOptions(compile=True), 'eager')
    assert all(callable(call) for call in compiled.calls)
    assert isinstance(dit.blocks[0].self_attn, FusedQKVSelfAttention)
    with pytest.raises(ValueError, match='bfloat16'):
        prepare_blocks(dit, EngineOptions(fp8_linear='rowwise'), 'eager')


def test_cpu_without_the_triton_interpreter_keeps_the_torch_path(dit):
    model = copy.deepcopy(dit)
    transformed(model)
    assert not any(block.self_attn.qk_kernel for block in model.blocks)


def test_attention_op_passes_opcheck():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 5, 3, 8, generator=g) for _ in range(3))
    torch.library.opcheck(torch.ops.dreamzero.attention.default, (q, k, v))
    torch.testing.assert_close(attention(q, k, v), torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2))  # fmt: skip
    window = torch.randn(2, 9, 3, 8, generator=g)
    torch.library.opcheck(torch.ops.dreamzero.attention.default, (q, window, window))


def _ffn_ops(device):
    """The aten ops of a bf16 :class:`TanhGeluFFN` on ``device`` (traced on fake tensors)."""
    ffn = TanhGeluFFN(torch.nn.Linear(16, 32), torch.nn.GELU(approximate='tanh'),
                      torch.nn.Linear(32, 16))  # fmt: skip
    names = [name for name, _ in ffn.named_parameters()]

    def run(x, *parameters):
        return torch.func.functional_call(ffn, dict(zip(names, parameters, strict=True)), (x,))

    shapes = [(2, 5, 16)] + [tuple(p.shape) for p in ffn.parameters()]
    with FakeTensorMode():
        tensors = [torch.empty(*s, device=device, dtype=torch.bfloat16) for s in shapes]
        graph = make_fx(run)(*tensors)
    return [str(node.target) for node in graph.graph.nodes if node.op == 'call_function']


def test_gelu_is_in_the_ffn_product_epilogue_on_cuda_only():
    on_cuda = _ffn_ops('cuda')
    assert 'aten._addmm_activation.default' in on_cuda and 'aten.gelu.default' not in on_cuda
    # The CPU's _addmm_activation applies the erf GELU, so the CPU keeps the separate kernels.
    on_cpu = _ffn_ops('cpu')
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


def test_compiled_block_over_an_fp8_kv_cache():
    """The FP8 cache's window (its cached tokens dequantized) compiles too."""
    dit = make_dit(torch.bfloat16)
    x = call_inputs(dit)

    def run(model, runs):
        runs.install(model)
        with torch.no_grad():
            cache = model.new_cache(2, 'fp8')
            model.prefill(*x['clean'], x['context'], cache, 0)
            model.prefill(*x['noisy'], x['context'], cache, 1)  # cached tokens: 1 frame
            return model(
                *x['noisy'], x['timestep'], x['context'], cache, 3,
                x['action'], x['timestep_action'], x['state'],
            )  # fmt: skip

    reference = run(dit, eager(dit))
    model = copy.deepcopy(dit)
    compiled = run(model, transformed(model, 'aot_eager'))
    eager(model).install(model)
    assert rel(compiled.video, reference.video) < 0.02
    assert rel(compiled.action, reference.action) < 0.02
