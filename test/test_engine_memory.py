# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Memory options, the memory estimate and the refusal of what cannot fit, the compile cache.

FP8 weights held instead of bf16, host encoders, the FP8 K/V cache; the persistent compile cache
folder.
"""

import argparse
import os
from pathlib import Path
import subprocess
import sys

from dit_support import call_inputs, make_dit, rel, transformed
from node_support import child_pids
import numpy as np
import pytest
import torch

from dreamzero_ros.engine import DreamZeroEngine, EngineConfig
from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint
from dreamzero_ros.engine.checkpoint.synthetic_droid import random_observation
from dreamzero_ros.engine.loader import add_engine_arguments, load_engine
from dreamzero_ros.engine.memory.estimate import GIB, estimate_memory
from dreamzero_ros.engine.memory.offload import stream_parts_, streamed_device
from dreamzero_ros.engine.memory.placement import build_dit
from dreamzero_ros.engine.networks.fp8 import Fp8Linear, quantize_weight
from dreamzero_ros.engine.networks.kv_cache import Fp8KVCache, KVCache
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.engine.speed.acceleration import held_fp8_mode
from dreamzero_ros.engine.speed.compile_cache import compile_cache_folder, use_compile_cache
from dreamzero_ros.engine.workers import worker
from dreamzero_ros.engine.workers.worker import load_worker_dit
from dreamzero_ros.errors import DeviceMemoryError

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

ROOT = Path(__file__).resolve().parents[1]


def options(**values) -> EngineOptions:
    """Engine options in bfloat16 on the CPU (the presets' default) with ``values``."""
    return EngineOptions(**{'device': 'cpu', 'dtype': 'bfloat16', **values})


def _actions(engine, chunks=4):
    out = []
    for step in range(chunks):
        observation = random_observation(seed=step, session_id='s', stamp=step / 15)
        out.append(engine.infer(observation).actions)
    return np.stack(out)


def test_memory_options_default_to_the_device_and_the_model():
    defaults = EngineConfig.tiny().options
    assert (defaults.text_encoder, defaults.image_encoder, defaults.kv_cache) == (
        'device',
        'device',
        'model',
    )


@pytest.fixture(scope='module')
def tiny_checkpoint(tmp_path_factory):
    return write_random_checkpoint(tmp_path_factory.mktemp('tiny'), preset='tiny')


def test_a_checkpoint_loads_into_fp8_layers_tensor_by_tensor(tiny_checkpoint):
    bf16 = load_engine(tiny_checkpoint, options())
    fp8 = load_engine(tiny_checkpoint, options(fp8_linear='rowwise'))
    layers = {n: m for n, m in fp8.modules.dit.named_modules() if isinstance(m, Fp8Linear)}
    # every linear of every block, self- and cross-attention (k/v of text and image) and FFN
    assert len(layers) == 12 * len(fp8.modules.dit.blocks)
    assert held_fp8_mode(fp8.modules.dit) == 'rowwise'
    for name, layer in layers.items():
        exact = bf16.modules.dit.get_submodule(name)
        expected = quantize_weight(exact.weight, exact.bias, 'rowwise')
        assert torch.equal(layer.weight.float(), expected.weight.float())
        assert torch.equal(layer.scale, expected.scale)
        assert torch.equal(layer.bias, exact.bias)
    # No model-dtype copy is kept: the checkpoint keys are the same, the values one byte each.
    assert fp8.modules.dit.state_dict().keys() == bf16.modules.dit.state_dict().keys()
    assert all(layer.weight.element_size() == 1 for layer in layers.values())
    actions = _actions(bf16, 2), _actions(fp8, 2)
    assert 0 < np.abs(actions[0] - actions[1]).max() < 0.05


def test_a_cfg_parallel_worker_builds_its_dit_in_fp8():
    fp8 = options(fp8_linear='rowwise')
    worker = load_worker_dit(fp8, preset='tiny', seed=5)
    engine = DreamZeroEngine.from_config(
        EngineConfig.tiny(options=fp8), seed=5
    )  # the same random DiT as rank 0's
    assert held_fp8_mode(worker) == 'rowwise'
    for (name, a), b in zip(
        worker.state_dict().items(), engine.modules.dit.state_dict().values(), strict=True
    ):
        assert torch.equal(a.float(), b.float()), name


def test_tensor_parallel_ranks_get_the_memory_options_and_serve_the_one_process_fp8_actions(
    tiny_checkpoint,
):
    """The node's engine on TP 2 (this process is rank 0, the worker a process it starts)."""
    from dreamzero_ros.core.config.node_config import build_settings
    from dreamzero_ros.core.policy.policy_factory import create_policy

    values = {
        'engine.checkpoint': str(tiny_checkpoint),
        'engine.device': 'cpu',
        'engine.dtype': 'bfloat16',
        'engine.fp8_linear': 'rowwise',
        'engine.kv_cache': 'fp8',
        'engine.text_encoder': 'cpu',
        'engine.tensor_parallel': 2,
    }
    policy = create_policy(build_settings(values), log=lambda text: None)
    try:
        commands = [Path(f'/proc/{pid}/cmdline').read_text() for pid in child_pids(os.getpid())]
        (command,) = [c.split('\0') for c in commands if worker.__name__ in c]
        assert '--fp8-linear=rowwise' in command and '--tensor-parallel=2' in command
        engine = policy.policy
        dit = engine.modules.dit
        assert (dit.tensor_parallel.rank, dit.tensor_parallel.size) == (0, 2)
        assert held_fp8_mode(dit) == 'rowwise' and dit.blocks[0].ffn[0].weight.element_size() == 1
        assert dit.blocks[0].ffn[0].out_features == dit.config.ffn_dim // 2
        served = _actions(policy, 3)
        assert isinstance(engine.sessions.get('s').denoise.cache, Fp8KVCache)
    finally:
        policy.close()
    assert not torch.distributed.is_initialized()  # the group was left, the worker ended
    one_process = load_engine(
        tiny_checkpoint, options(fp8_linear='rowwise', text_encoder='cpu', kv_cache='fp8')
    )
    want = _actions(one_process, 3)
    # Each shard's own FP8 scales: close to the one-process FP8 actions (which differ by about
    # 1e-3 from bf16 here), far from another chunk's.
    assert rel(torch.from_numpy(served), torch.from_numpy(want)) < 0.01
    assert np.abs(served - want).max() < 0.05
    assert rel(torch.from_numpy(want[0]), torch.from_numpy(want[1])) > 0.1


def _dequantized(cache: Fp8KVCache, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The committed keys and values of ``layer`` in the model dtype."""
    dtype, cached = cache.work_k.dtype, slice(0, cache.length)
    k = cache.k8[layer, :, cached].to(dtype) * cache.k_scale[layer, :, cached]
    v = cache.v8[layer, :, cached].to(dtype) * cache.v_scale[layer, :, cached]
    return k, v


def _cache_pair(dit):
    """A model-dtype and an FP8 cache fed the same prefill and denoising call."""
    x = call_inputs(dit)
    caches = []
    for kind in ('model', 'fp8'):
        cache = dit.new_cache(2, kind)
        dit.prefill(*x['clean'], x['context'], cache, 0)
        out = dit(
            *x['noisy'], x['timestep'], x['context'], cache, 1,
            x['action'], x['timestep_action'], x['state'],
        )  # fmt: skip
        caches.append((cache, out))
    return caches


@pytest.mark.parametrize('fast', [False, True])
def test_fp8_kv_cache_attends_within_fp8_rounding(fast):
    dit = make_dit(torch.bfloat16)
    if fast:
        transformed(dit)
    with torch.no_grad():
        (exact, out), (fp8, out8) = _cache_pair(dit)
    assert isinstance(fp8, Fp8KVCache) and type(exact) is KVCache
    assert fp8.length == exact.length > 0
    for layer in range(len(dit.blocks)):
        k, v = _dequantized(fp8, layer)
        assert 0 < rel(k, exact.k[layer, :, : exact.length]) < 0.05
        assert 0 < rel(v, exact.v[layer, :, : exact.length]) < 0.05
    assert fp8.k8.dtype == torch.float8_e4m3fn and fp8.k_scale.shape[-1] == 1
    assert rel(out8.video, out.video) < 0.05 and rel(out8.action, out.action) < 0.05


def test_fp8_kv_cache_rows_window_and_commit():
    cache = Fp8KVCache(2, 2, 2, 16, max_video_tokens=6, max_register_tokens=2,
                       dtype=torch.bfloat16, device='cpu')  # fmt: skip
    g = torch.Generator().manual_seed(0)
    stored = []
    for _ in range(2):  # two prefills of 4 video tokens: the window keeps the last 6
        cache.begin(4, 0)
        for layer in range(2):
            k, v = (torch.randn(2, 4, 2, 16, generator=g).to(torch.bfloat16) for _ in range(2))
            cache.store(layer, k, v)
            stored.append(k)
        cache.commit()
    assert cache.length == 6
    k0, _ = _dequantized(cache, 0)
    expected = torch.cat([stored[0][:, 2:], stored[2]], dim=1)
    assert rel(k0, expected) < 0.05
    view = cache.rows(1)
    view.begin(0, 2)  # (a full window: a row view may not drop tokens)
    q = torch.randn(1, 2, 2, 16, generator=g).to(torch.bfloat16)
    k_new = v_new = torch.randn(1, 2, 2, 16, generator=g).to(torch.bfloat16)
    assert view.attend(0, q, k_new, v_new).shape == (1, 2, 2, 16)
    with pytest.raises(RuntimeError, match='cannot commit'):
        view.commit()
    cache.begin(0, 2)  # a denoising call is never committed
    with pytest.raises(RuntimeError, match='prefill calls'):
        cache.commit()


def test_fp8_kv_dequantization_kernel_matches_torch():
    pytest.importorskip('triton')
    code = (
        'import torch\n'
        'from dreamzero_ros.engine.networks import kv_fp8_kernel as k\n'
        'from dreamzero_ros.engine.networks.kv_cache import _quantize_rows\n'
        'g = torch.Generator().manual_seed(0)\n'
        'store = torch.zeros(2, 60, 3, 16, dtype=torch.float8_e4m3fn)\n'
        'scale = torch.zeros(2, 60, 3, 1, dtype=torch.bfloat16)\n'
        'store[:, :50], scale[:, :50] = _quantize_rows(3 * torch.randn(2, 50, 3, 16, '
        'generator=g), torch.bfloat16)\n'
        'out = torch.zeros(2, 60, 3, 16, dtype=torch.bfloat16)\n'
        'assert k.available(torch.device("cpu"))\n'
        'k.dequantize_into(store[:, :50], scale[:, :50], out[:, :50])\n'
        'ref = store[:, :50].to(torch.bfloat16) * scale[:, :50]\n'
        'assert torch.allclose(out[:, :50].float(), ref.float(), rtol=2**-7, atol=0)\n'
        'assert (out[:, 50:] == 0).all()\n'
        'print("ok")\n'
    )
    result = subprocess.run(
        [sys.executable, '-c', code],
        env={**os.environ, 'TRITON_INTERPRET': '1'},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 0 and result.stdout.strip() == 'ok', result.stderr[-3000:]


def test_host_encoders_predict_what_device_encoders_do():
    reference = _actions(DreamZeroEngine.from_config(EngineConfig.tiny(), seed=3))
    for memory in (
        options(text_encoder='cpu'),
        options(text_encoder='offload', image_encoder='offload'),
    ):
        engine = DreamZeroEngine.from_config(EngineConfig.tiny(options=memory), seed=3)
        np.testing.assert_array_equal(_actions(engine), reference)
    fp8_kv = DreamZeroEngine.from_config(EngineConfig.tiny(options=options(kv_cache='fp8')), 3)
    assert 0 < np.abs(_actions(fp8_kv) - reference).max() < 0.05


def test_streamed_parts_hold_copies_only_while_they_run():
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Linear(16, 16))
    host = list(model.parameters())
    device = torch.device('meta')  # a device other than the host's, on any machine
    stream_parts_(model, [model, model[1]], device)
    seen = []
    model[1].register_forward_pre_hook(lambda m, a: seen.append(m.weight))
    assert streamed_device(model) == device
    out = model(torch.randn(2, 16, device=device))
    # the part ran with copies of its tensors on the device; the host tensors are back
    assert out.device == device and seen[0].device == device
    restored = zip(model.parameters(), host, strict=True)
    assert all(a is b and a.device.type == 'cpu' for a, b in restored)


def test_the_estimate_of_the_14b_model_per_option():
    bf16 = estimate_memory(EngineConfig.droid_14b())
    fp8 = estimate_memory(EngineConfig.droid_14b(options=options(fp8_linear='rowwise')))
    gpu32 = EngineConfig.droid_14b(
        options=options(fp8_linear='rowwise', text_encoder='offload', kv_cache='fp8')
    )
    small = estimate_memory(gpu32)
    # measured on an H200 (docs/performance.md): peaks 58.5, 43.5 and 27.2 GiB
    assert 58.5 < bf16.total / GIB < 61 and 43.5 < fp8.total / GIB < 46
    assert 27.2 < small.total / GIB <= 30
    assert fp8.weights['dit'] < 0.52 * bf16.weights['dit']
    assert small.kv_cache < 0.55 * fp8.kv_cache and 'text_encoder' in small.weights
    assert (
        'text_encoder'
        not in estimate_memory(EngineConfig.droid_14b(options=options(text_encoder='cpu'))).weights
    )
    one_row = estimate_memory(gpu32, cfg_rows=1)
    assert one_row.kv_cache < 0.51 * small.kv_cache
    assert 'K/V cache' in small.describe()


def test_the_estimate_counts_one_rank():
    fp8 = EngineConfig.droid_14b(options=options(fp8_linear='rowwise'))
    whole = estimate_memory(fp8)
    # CFG parallel: each rank a whole DiT, one CFG row of caches
    cfg = estimate_memory(fp8, cfg_rows=1)
    assert cfg.weights == whole.weights and cfg.kv_cache < 0.51 * whole.kv_cache
    # Tensor parallel: a rank holds its shard of the (FP8) blocks and its heads' caches
    tp = estimate_memory(fp8, tp_size=2)
    assert 0.49 * whole.weights['dit'] < tp.weights['dit'] < 0.51 * whole.weights['dit'] + GIB
    assert tp.kv_cache == whole.kv_cache // 2 and tp.weights['vae'] == whole.weights['vae']
    # ... exactly what a shard built for rank 1 of 2 holds
    tiny = EngineConfig.tiny(options=options(fp8_linear='rowwise'))
    shard = build_dit(tiny, tp_rank=1, tp_size=2)
    held = sum(t.numel() * t.element_size() for t in (*shard.parameters(), *shard.buffers()))
    assert estimate_memory(tiny, tp_size=2).weights['dit'] == held


def test_loading_refuses_a_configuration_that_cannot_fit(tiny_checkpoint):
    need = estimate_memory(EngineConfig.tiny()).total
    with pytest.raises(DeviceMemoryError, match=r'needs about .* GiB free: use fp8_linear'):
        load_engine(tiny_checkpoint, options(memory_budget_gib=need / 2 / GIB))
    load_engine(tiny_checkpoint, options(memory_budget_gib=(need + 1024) / GIB)).close()


def test_the_node_refuses_at_configure_with_an_injected_budget(tiny_checkpoint):
    from dreamzero_ros.core.config.node_config import build_settings
    from dreamzero_ros.core.policy.policy_factory import create_policy

    values = {
        'engine.checkpoint': str(tiny_checkpoint),
        'engine.memory_budget_gib': 1e-4,
        'engine.kv_cache': 'fp8',
        'engine.text_encoder': 'offload',
    }
    with pytest.raises(DeviceMemoryError, match='0.0 GiB free'):
        create_policy(build_settings(values), log=lambda text: None)
    values['engine.memory_budget_gib'] = 2.0
    policy = create_policy(build_settings(values), log=lambda text: None)
    try:
        engine_options = policy.policy.config.options
        assert (engine_options.kv_cache, engine_options.text_encoder) == ('fp8', 'offload')
    finally:
        policy.close()


def test_command_line_memory_options():
    parser = argparse.ArgumentParser()
    add_engine_arguments(parser)
    args = parser.parse_args(
        ['--text-encoder', 'offload', '--image-encoder', 'offload', '--kv-cache', 'fp8',
         '--memory-budget-gib', '1.5', '--compile-cache', 'off']
    )  # fmt: skip
    parsed = EngineOptions.from_arguments(args)
    assert (parsed.text_encoder, parsed.image_encoder, parsed.kv_cache) == (
        'offload',
        'offload',
        'fp8',
    )
    assert parsed.memory_budget == int(1.5 * GIB)
    assert parsed.compile_cache == 'off'
    assert EngineOptions.from_arguments(parser.parse_args([])).memory_budget is None


def test_compile_cache_folder(tmp_path, monkeypatch):
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'xdg'))
    # torch writes its own default into TORCHINDUCTOR_CACHE_DIR: that is not the user's choice
    monkeypatch.setenv('TORCHINDUCTOR_CACHE_DIR', default_cache_dir())
    monkeypatch.delenv('TRITON_CACHE_DIR', raising=False)
    folder = tmp_path / 'xdg' / 'dreamzero_ros' / 'torch_compile'
    assert compile_cache_folder('') == folder
    assert compile_cache_folder('off') is None
    assert compile_cache_folder('~/c') == Path('~/c').expanduser()
    assert use_compile_cache('') == folder and folder.is_dir()
    assert os.environ['TORCHINDUCTOR_CACHE_DIR'] == str(folder / 'inductor')
    assert os.environ['TRITON_CACHE_DIR'] == str(folder / 'triton')
    monkeypatch.setenv('TORCHINDUCTOR_CACHE_DIR', str(tmp_path / 'mine' / 'inductor'))
    assert compile_cache_folder('') == tmp_path / 'mine'  # the user's own folder is kept
    assert use_compile_cache('off') is None
