# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A tensor-parallel DiT computes the unsharded one's calls, with every block option.

Two spawned processes over gloo each shard the same tiny DiT (rank 0 and rank 1 of 2) and run a
prefill and a denoising call through the reference blocks, the transformed ones (fused q/k/v,
GELU epilogue), the transformed ones compiled by ``torch.compile`` (inductor: the all-reduces are
functional collectives inside the compiled block) and FP8 linears.  The test process runs the
unsharded DiT: the reference blocks (all three compute the reference function), and FP8
linears.

A shard built before it holds values (a worker rank's, rank 0's of a parallel engine) loads its
part of each checkpoint tensor, or of the whole model's random draw, and quantizes FP8 weights
after the cut: the same weights as cutting, then quantizing the whole model.
"""

import multiprocessing
import traceback

from dit_support import call_inputs, make_dit, rel, run_call, transformed
import pytest
import torch
import torch.distributed as dist

from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint
from dreamzero_ros.engine.config import EngineConfig
from dreamzero_ros.engine.memory.placement import build_dit
from dreamzero_ros.engine.networks.fp8 import Fp8Linear
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.engine.parallel.tensor_parallel import (
    join_group_,
    shard_dit_,
    shard_problem,
    split_problem,
)
from dreamzero_ros.engine.speed.acceleration import held_fp8_mode, prepare_blocks, quantize_dit_
from dreamzero_ros.engine.workers.protocol import free_port
from dreamzero_ros.engine.workers.worker import load_worker_dit

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

#: name -> (model dtype, speed options; None: the transformed blocks, eager)
VARIANTS = {
    'reference': (torch.float32, EngineOptions()),
    'transformed': (torch.float32, None),
    'inductor': (torch.float32, EngineOptions(compile=True)),
    'fp8': (torch.bfloat16, EngineOptions(fp8_linear='rowwise')),
}
TIMEOUT_S = 300


def _bf16(**values) -> EngineOptions:
    """Engine options in bfloat16 on the CPU with ``values``."""
    return EngineOptions(device='cpu', dtype='bfloat16', **values)


def _outputs(dit, options: EngineOptions | None) -> dict[str, torch.Tensor]:
    runs = transformed(dit) if options is None else prepare_blocks(dit, options, 'inductor')
    out, _ = run_call(dit, call_inputs(dit), runs)
    return {'video': out.video, 'action': out.action}


def _rank(rank: int, port: int, result: str) -> None:
    torch.set_num_threads(1)
    try:
        dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}', rank=rank,
                                world_size=2)  # fmt: skip
        outputs, heads = {}, []
        for name, (dtype, options) in VARIANTS.items():
            dit = shard_dit_(make_dit(dtype), rank, 2)
            join_group_(dit, dist.group.WORLD)
            heads.append(dit.blocks[0].self_attn.num_heads)
            outputs[name] = _outputs(dit, options)
        torch.save({'outputs': outputs, 'heads': heads}, result)
        dist.destroy_process_group()
    except Exception:  # reported to the test through the result file
        torch.save({'error': traceback.format_exc()}, result)


@pytest.fixture(scope='module')
def sharded(tmp_path_factory):
    """Each rank's outputs of every variant."""
    folder = tmp_path_factory.mktemp('tp')
    port = free_port()
    context = multiprocessing.get_context('spawn')
    ranks = [
        context.Process(target=_rank, args=(rank, port, str(folder / f'rank{rank}.pt')))
        for rank in range(2)
    ]
    for process in ranks:
        process.start()
    for process in ranks:
        process.join(TIMEOUT_S)
        if process.is_alive():
            process.kill()
    results = [torch.load(folder / f'rank{rank}.pt') for rank in range(2)]
    for result in results:
        assert 'error' not in result, result['error']
    return results


@pytest.fixture(scope='module')
def unsharded():
    return _outputs(make_dit(), EngineOptions())


@pytest.mark.parametrize('variant', ['reference', 'transformed', 'inductor'])
def test_sharded_calls_equal_the_unsharded_dit(sharded, unsharded, variant):
    want = unsharded
    for result in sharded:
        assert result['heads'][0] == 1  # the tiny DiT's 2 heads, one per rank
        got = result['outputs'][variant]
        for key in ('video', 'action'):
            torch.testing.assert_close(got[key], want[key], rtol=1e-5, atol=1e-5)
    # Both ranks hold the whole output: the all-reduces ran.
    torch.testing.assert_close(sharded[0]['outputs'][variant], sharded[1]['outputs'][variant])


def test_sharded_fp8_quantizes_each_shard_close_to_the_unsharded_fp8(sharded):
    dtype, options = VARIANTS['fp8']
    unsharded = _outputs(make_dit(dtype), options)
    bf16 = _outputs(make_dit(dtype), EngineOptions())
    got = sharded[0]['outputs']['fp8']
    for key in ('video', 'action'):
        # Row-parallel shards get their own row scales: close to the unsharded FP8 path, and
        # as close to bf16 as it is.
        assert rel(got[key], unsharded[key]) < 0.05
        assert rel(got[key], bf16[key]) < 2 * rel(unsharded[key], bf16[key]) + 0.01


def test_split_problem_names_heads_and_ffn():
    config = make_dit().config
    assert split_problem(config, 2) == ''
    assert 'do not split over 3 tensor-parallel ranks' in split_problem(config, 3)


@pytest.fixture(scope='module')
def tiny_checkpoint(tmp_path_factory):
    return write_random_checkpoint(tmp_path_factory.mktemp('tiny'), preset='tiny')


def _whole_then_cut(checkpoint, rank: int, fp8: str = 'off'):
    """The reference order: the whole bf16 DiT, cut to shard ``rank`` of 2, then quantized."""
    dit = shard_dit_(load_worker_dit(_bf16(), checkpoint), rank, 2)
    if fp8 != 'off':
        quantize_dit_(dit, fp8)
    return dit


@pytest.mark.parametrize('fp8', ['off', 'rowwise', 'tensorwise'])
def test_a_shard_loads_its_part_and_quantizes_it_after_the_cut(tiny_checkpoint, fp8):
    for rank in (0, 1):
        shard = load_worker_dit(
            _bf16(fp8_linear=fp8, tensor_parallel=2), tiny_checkpoint, tp_rank=rank
        )
        want = _whole_then_cut(tiny_checkpoint, rank, fp8)
        assert (shard.tensor_parallel.rank, shard.tensor_parallel.size) == (rank, 2)
        assert held_fp8_mode(shard) == fp8
        got, expected = shard.state_dict(), want.state_dict()
        assert got.keys() == expected.keys()
        for key, value in got.items():
            assert torch.equal(value.float(), expected[key].float()), key
        for name, layer in shard.named_modules():
            if isinstance(layer, Fp8Linear):
                assert torch.equal(layer.scale, want.get_submodule(name).scale), name
    if fp8 != 'off':
        # Not a cut of the whole model's FP8 weights: the row-parallel layers (o, ffn.2) of a
        # shard have the scales of its own columns.
        whole = load_worker_dit(_bf16(fp8_linear=fp8), tiny_checkpoint)
        row_parallel = [
            f'blocks.{i}.{name}'
            for i in range(len(whole.blocks))
            for name in ('self_attn.o', 'cross_attn.o', 'ffn.2')
        ]
        assert any(
            not torch.equal(shard.get_submodule(n).scale, whole.get_submodule(n).scale)
            for n in row_parallel
        )


def test_a_random_shard_is_its_part_of_the_whole_random_model():
    for fp8 in ('off', 'rowwise'):
        options = _bf16(fp8_linear=fp8, tensor_parallel=2)
        shard = load_worker_dit(options, preset='tiny', seed=4, tp_rank=1)
        whole = shard_dit_(load_worker_dit(_bf16(), preset='tiny', seed=4), 1, 2)
        if fp8 != 'off':
            quantize_dit_(whole, fp8)
        for (key, a), b in zip(
            shard.state_dict().items(), whole.state_dict().values(), strict=True
        ):
            assert torch.equal(a.float(), b.float()), key


def test_fp8_weights_quantized_whole_are_never_cut():
    config = EngineConfig.tiny(options=_bf16(fp8_linear='rowwise'))
    dit = build_dit(config, seed=0)
    with pytest.raises(ValueError, match='shard it before quantizing'):
        shard_dit_(dit, 0, 2)
    assert 'each rank quantizes its own shard' in shard_problem(dit, 2, 1)
    assert shard_problem(dit, 1, 0) == ''  # unsharded, it may serve as it is


def test_a_shard_must_be_the_one_its_rank_is_given():
    shard = build_dit(EngineConfig.tiny(), seed=0, tp_rank=1, tp_size=2)
    assert shard_problem(shard, 2, 1) == ''
    assert 'built as tensor-parallel shard 1 of 2, the group makes this rank shard 0 of 2' in (
        shard_problem(shard, 2, 0)
    )
    assert 'shard 1 of 2' in shard_problem(shard, 1, 0)
    assert 'do not split over 3' in shard_problem(shard, 3, 1)


def test_a_shard_refuses_to_compute_before_it_joined_its_group():
    dit = shard_dit_(make_dit(), 0, 2)
    with pytest.raises(RuntimeError, match='not joined its tensor-parallel group'):
        run_call(dit, call_inputs(dit))
    with pytest.raises(RuntimeError, match='not joined its tensor-parallel group'):
        run_call(dit, call_inputs(dit), transformed(dit))
