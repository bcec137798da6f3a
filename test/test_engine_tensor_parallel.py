# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A tensor-parallel DiT computes the unsharded one's calls, with every block processor option.

Two spawned processes over gloo each shard the same tiny DiT (rank 0 and rank 1 of 2) and run a
prefill and a denoising call through the reference processor, the fast one, the fast one with
``torch.compile`` (inductor: its all-reduces are functional collectives inside the compiled
graphs) and FP8 linears.  The test process runs the unsharded DiT: the reference processor (all
three compute the reference function), and FP8 linears.
"""

import multiprocessing
import traceback

from dit_support import call_inputs, fast_processors, make_dit, rel, run_call
import pytest
import torch
import torch.distributed as dist

from dreamzero_ros.engine.acceleration import AccelerationConfig, block_processors
from dreamzero_ros.engine.cfg_parallel import free_port
from dreamzero_ros.engine.tensor_parallel import shard_dit_, split_problem

#: name -> (model dtype, acceleration options; None: the fast processor, eager)
VARIANTS = {
    'reference': (torch.float32, AccelerationConfig()),
    'fast': (torch.float32, None),
    'inductor': (torch.float32, AccelerationConfig(compile=True)),
    'fp8': (torch.bfloat16, AccelerationConfig(fp8_linear='rowwise')),
}
TIMEOUT_S = 300


def _outputs(dit, options: AccelerationConfig | None) -> dict[str, torch.Tensor]:
    processors = fast_processors(dit) if options is None else block_processors(dit, options)
    out, _ = run_call(dit, call_inputs(dit), processors)
    return {'video': out.video, 'action': out.action}


def _rank(rank: int, port: int, result: str) -> None:
    torch.set_num_threads(1)
    try:
        dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}', rank=rank,
                                world_size=2)  # fmt: skip
        outputs, heads = {}, []
        for name, (dtype, options) in VARIANTS.items():
            dit = shard_dit_(make_dit(dtype), None)
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
    return _outputs(make_dit(), AccelerationConfig())


@pytest.mark.parametrize('variant', ['reference', 'fast', 'inductor'])
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
    bf16 = _outputs(make_dit(dtype), AccelerationConfig())
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
