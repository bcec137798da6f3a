# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Checkpoint layout: write, load back, and strict errors naming the tensor or the shard."""

import json
import logging
import re

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.torch import save_file
import torch

from dreamzero_ros.engine import (
    CheckpointError,
    ConfigError,
    DreamZeroEngine,
    EmbodimentError,
    EngineConfig,
    MetadataError,
)
from dreamzero_ros.engine.checkpoint.layout import INDEX_FILE, checkpoint_state, read_weight_map
from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint
from dreamzero_ros.engine.checkpoint.synthetic_droid import random_observation
from dreamzero_ros.engine.checkpoint.weights import load_checkpoint as load_weights
from dreamzero_ros.engine.memory.placement import build_modules
from dreamzero_ros.engine.options import EngineOptions


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    return write_random_checkpoint(tmp_path_factory.mktemp('ckpt'), 'tiny', seed=5, num_shards=3)


def _copy(src, dst):
    dst.mkdir()
    for path in src.rglob('*'):
        if path.is_file():
            target = dst / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    return dst


def _tiny_modules(dtype='float32'):
    return build_modules(
        EngineConfig.tiny(options=EngineOptions(device='cpu', dtype=dtype))
    ).as_dict()


def _shards(folder):
    index = json.loads((folder / INDEX_FILE).read_text())
    return index, sorted(set(index['weight_map'].values()))


def _rewrite_shard(folder, shard, change):
    with safe_open(str(folder / shard), framework='pt') as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
    change(tensors)
    save_file(tensors, str(folder / shard))


def test_layout_and_real_tensor_names(checkpoint):
    names = sorted(p.name for p in checkpoint.iterdir())
    assert names == [
        'config.json',
        'experiment_cfg',
        'model-00001-of-00003.safetensors',
        'model-00002-of-00003.safetensors',
        'model-00003-of-00003.safetensors',
        'model.safetensors.index.json',
        'tokenizer',
    ]
    assert (checkpoint / 'experiment_cfg' / 'metadata.json').is_file()
    assert (checkpoint / 'tokenizer' / 'spiece.model').is_file()
    weight_map = read_weight_map(checkpoint)
    assert 'action_head.model.blocks.0.self_attn.q.weight' in weight_map
    assert 'action_head.text_encoder.token_embedding.weight' in weight_map
    assert 'action_head.image_encoder.model.visual.patch_embedding.weight' in weight_map
    assert 'action_head.vae.model.encoder.conv1.weight' in weight_map
    assert len(set(weight_map.values())) == 3
    with safe_open(str(checkpoint / weight_map['action_head.model.head.head.weight']), 'pt') as f:
        assert f.get_tensor('action_head.model.head.head.weight').dtype == torch.bfloat16


def test_weights_round_trip_exactly(tmp_path):
    config = EngineConfig.tiny(options=EngineOptions(device='cpu', dtype='float32'))
    for shards in (0, 2):
        folder = write_random_checkpoint(tmp_path / str(shards), config, 11, shards, 'float32')
        original = checkpoint_state(build_modules(config, seed=11).as_dict())
        modules = _tiny_modules()
        load_weights(folder, modules)
        loaded = checkpoint_state(modules)
        assert loaded.keys() == original.keys()
        for key, tensor in original.items():
            assert torch.equal(loaded[key], tensor), key


def test_loading_logs_a_line_per_shard_read(checkpoint, caplog):
    modules = _tiny_modules()
    with caplog.at_level(logging.INFO, logger='dreamzero_ros.engine.checkpoint.weights'):
        load_weights(checkpoint, modules)
    lines = [record.getMessage() for record in caplog.records]
    assert re.fullmatch(r'loading weights: [\d.]+ (kB|MB) from 3 file\(s\)', lines[0]), lines
    _, shards = _shards(checkpoint)
    assert len(lines) == 1 + len(shards)
    for number, (line, shard) in enumerate(zip(lines[1:], shards, strict=True), start=1):
        assert re.fullmatch(
            rf'loaded weights: file {number}/3 {re.escape(shard)}, [\d.]+ (kB|MB) in [\d.]+ s',
            line,
        ), line


def test_forwarded_logs_give_the_load_lines_to_a_tool_and_only_to_it(checkpoint, caplog):
    from dreamzero_ros.log_forwarding import forwarded_logs

    lines = []
    engine_logger = logging.getLogger('dreamzero_ros.engine')
    with caplog.at_level(logging.INFO), forwarded_logs(lines.append):
        load_weights(checkpoint, _tiny_modules())
    assert len(lines) == 4 and lines[-1].startswith('loaded weights: file 3/3 '), lines
    assert caplog.records == []  # not also printed by the root logger's handlers
    assert engine_logger.propagate and engine_logger.handlers == []


def test_loading_casts_to_the_engine_dtype(checkpoint):
    modules = _tiny_modules('float32')
    load_weights(checkpoint, modules)
    weight = modules['dit'].blocks[0].self_attn.q.weight
    assert weight.dtype == torch.float32
    key = 'action_head.model.blocks.0.self_attn.q.weight'
    with safe_open(str(checkpoint / read_weight_map(checkpoint)[key]), 'pt') as handle:
        stored = handle.get_tensor(key)
    assert torch.equal(weight, stored.float())


def test_same_outputs_after_save_and_load(tmp_path):
    config = EngineConfig.tiny(options=EngineOptions(device='cpu', dtype='float32'))
    folder = write_random_checkpoint(tmp_path, config, seed=2, num_shards=2, dtype='float32')
    loaded = DreamZeroEngine.from_pretrained(folder, EngineOptions(device='cpu', dtype='float32'))
    built = DreamZeroEngine.from_config(config, seed=2)
    assert loaded.config == built.config
    for step in range(2):
        observation = random_observation(seed=step)
        np.testing.assert_array_equal(
            loaded.infer(observation).actions, built.infer(observation).actions
        )


def test_missing_tensor_is_named(checkpoint, tmp_path):
    folder = _copy(checkpoint, tmp_path / 'c')
    index, _ = _shards(folder)
    key = 'action_head.model.blocks.1.ffn.2.weight'
    shard = index['weight_map'].pop(key)
    (folder / INDEX_FILE).write_text(json.dumps(index))
    _rewrite_shard(folder, shard, lambda t: t.pop(key))
    with pytest.raises(CheckpointError, match=f'missing from the checkpoint, e.g. {key!r}'):
        load_weights(folder, _tiny_modules())


def test_unexpected_tensor_is_named_with_its_shard(checkpoint, tmp_path):
    folder = _copy(checkpoint, tmp_path / 'c')
    index, shards = _shards(folder)
    key = 'action_head.model.blocks.0.lora_A.weight'
    index['weight_map'][key] = shards[0]
    (folder / INDEX_FILE).write_text(json.dumps(index))
    _rewrite_shard(folder, shards[0], lambda t: t.__setitem__(key, torch.zeros(2)))
    with pytest.raises(CheckpointError, match=f'unexpected .*{key!r} in {shards[0]}'):
        load_weights(folder, _tiny_modules())


def test_ignored_tensors_are_accepted(checkpoint, tmp_path):
    folder = _copy(checkpoint, tmp_path / 'c')
    index, shards = _shards(folder)
    extra = {
        'action_head.image_encoder.model.textual.token_embedding.weight': torch.zeros(3, 2),
        'backbone.identity.weight': torch.zeros(1),
    }
    index['weight_map'].update(dict.fromkeys(extra, shards[-1]))
    (folder / INDEX_FILE).write_text(json.dumps(index))
    _rewrite_shard(folder, shards[-1], lambda t: t.update(extra))
    with_extras, plain = _tiny_modules(), _tiny_modules()
    load_weights(folder, with_extras)
    load_weights(checkpoint, plain)
    loaded, expected = checkpoint_state(with_extras), checkpoint_state(plain)
    # every engine tensor holds the checkpoint's values; the ignored ones went nowhere
    assert loaded.keys() == expected.keys() and not set(extra) & set(loaded)
    for key, tensor in loaded.items():
        assert torch.equal(tensor, expected[key]), key


def test_misshaped_tensor_is_named(checkpoint, tmp_path):
    folder = _copy(checkpoint, tmp_path / 'c')
    index, _ = _shards(folder)
    key = 'action_head.text_encoder.token_embedding.weight'
    shard = index['weight_map'][key]
    _rewrite_shard(folder, shard, lambda t: t.__setitem__(key, torch.zeros(7, 7)))
    with pytest.raises(CheckpointError, match=rf'{key!r} in {shard} has shape \(7, 7\)'):
        load_weights(folder, _tiny_modules())


@pytest.mark.parametrize('dtype', [torch.int32, torch.int64, torch.uint8, torch.bool])
def test_integer_or_boolean_tensor_is_refused_with_both_dtypes(checkpoint, tmp_path, dtype):
    folder = _copy(checkpoint, tmp_path / 'c')
    index, _ = _shards(folder)
    key = 'action_head.model.blocks.0.self_attn.q.weight'
    shard = index['weight_map'][key]

    def retype(tensors):
        tensors[key] = torch.ones_like(tensors[key], dtype=dtype)

    _rewrite_shard(folder, shard, retype)
    name = str(dtype).removeprefix('torch.')
    expected = rf'{key!r} in {shard} is stored as {name}, .*floating-point dtype float32'
    with pytest.raises(CheckpointError, match=expected):
        load_weights(folder, _tiny_modules('float32'))
    with pytest.raises(CheckpointError, match=rf'{key!r} .* stored as {name}'):
        DreamZeroEngine.from_pretrained(folder, EngineOptions(device='cpu', dtype='bfloat16'))


def test_any_floating_dtype_is_cast(checkpoint, tmp_path):
    folder = _copy(checkpoint, tmp_path / 'c')
    index, _ = _shards(folder)
    key = 'action_head.model.blocks.0.self_attn.q.weight'
    shard = index['weight_map'][key]
    _rewrite_shard(folder, shard, lambda t: t.__setitem__(key, t[key].to(torch.float16)))
    modules = _tiny_modules('float32')
    load_weights(folder, modules)
    with safe_open(str(folder / shard), 'pt') as handle:
        stored = handle.get_tensor(key)
    assert stored.dtype == torch.float16
    assert torch.equal(modules['dit'].blocks[0].self_attn.q.weight, stored.float())


#: The checkpoint's JSON files and the error each one's problems raise.
JSON_FILES = pytest.mark.parametrize(
    ('file', 'error'),
    [
        ('config.json', ConfigError),
        (INDEX_FILE, CheckpointError),
        ('experiment_cfg/metadata.json', MetadataError),
    ],
)


def _nested_json(depth):
    return '{"a": ' * depth + '1' + '}' * depth


@JSON_FILES
def test_json_nested_too_deeply_is_an_error_naming_the_file(checkpoint, tmp_path, file, error):
    folder = _copy(checkpoint, tmp_path / 'c')
    (folder / file).write_text(_nested_json(100_000))
    with pytest.raises(error, match=rf'{file} is not valid JSON: nested too deeply'):
        DreamZeroEngine.from_pretrained(folder, EngineOptions(device='cpu', dtype='float32'))


@JSON_FILES
def test_json_files_of_invalid_utf8_are_errors_naming_the_file(checkpoint, tmp_path, file, error):
    folder = _copy(checkpoint, tmp_path / 'c')
    (folder / file).write_bytes(b'{"a": "\xff\xfe"}')
    with pytest.raises(error, match=rf'{file} is not valid JSON'):
        DreamZeroEngine.from_pretrained(folder, EngineOptions(device='cpu', dtype='float32'))


def test_corrupt_and_missing_shards_are_named(checkpoint, tmp_path):
    folder = _copy(checkpoint, tmp_path / 'c')
    _, shards = _shards(folder)
    data = (folder / shards[1]).read_bytes()
    (folder / shards[1]).write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=f'shard {shards[1]} is unreadable'):
        load_weights(folder, _tiny_modules())
    (folder / shards[1]).unlink()
    with pytest.raises(CheckpointError, match=f'shard {shards[1]} listed in .* is missing'):
        load_weights(folder, _tiny_modules())


def test_index_and_shard_disagreements_are_named(checkpoint, tmp_path):
    folder = _copy(checkpoint, tmp_path / 'c')
    index, shards = _shards(folder)
    key = next(k for k, v in index['weight_map'].items() if v == shards[0])
    index['weight_map'][key] = shards[1]
    (folder / INDEX_FILE).write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match=f'shard {shards[0]} holds tensor|lacks tensor'):
        load_weights(folder, _tiny_modules())
    (folder / INDEX_FILE).write_text('{"weight_map": 3}')
    with pytest.raises(CheckpointError, match='weight_map'):
        load_weights(folder, _tiny_modules())
    (folder / INDEX_FILE).write_text(json.dumps({'weight_map': {key: '../elsewhere.safetensors'}}))
    with pytest.raises(CheckpointError, match='must be a file in the folder'):
        load_weights(folder, _tiny_modules())


def test_missing_files_are_named(checkpoint, tmp_path):
    folder = _copy(checkpoint, tmp_path / 'c')
    for shard in _shards(folder)[1]:
        (folder / shard).unlink()
    (folder / INDEX_FILE).unlink()
    with pytest.raises(CheckpointError, match='neither model.safetensors.index.json nor'):
        load_weights(folder, _tiny_modules())
    folder = _copy(checkpoint, tmp_path / 'd')
    (folder / 'experiment_cfg' / 'metadata.json').unlink()
    with pytest.raises(EmbodimentError, match='no experiment_cfg/metadata.json.* embodiment file'):
        DreamZeroEngine.from_pretrained(folder, EngineOptions(device='cpu', dtype='float32'))
    folder = _copy(checkpoint, tmp_path / 'e')
    moved = tmp_path / 'spiece.model'
    (folder / 'tokenizer' / 'spiece.model').rename(moved)
    with pytest.raises(CheckpointError, match='missing tokenizer .*spiece.model'):
        DreamZeroEngine.from_pretrained(folder, EngineOptions(device='cpu', dtype='float32'))
    engine = DreamZeroEngine.from_pretrained(
        folder, EngineOptions(device='cpu', dtype='float32'), tokenizer_file=moved
    )
    assert engine.infer(random_observation(seed=0)).actions.shape == (24, 8)


def test_published_model_has_the_upstream_tensor_census():
    """The 14B engine expects upstream's tensors (built on the meta device: no memory)."""
    modules = build_modules(EngineConfig.droid_14b().on('meta')).as_dict()
    state = checkpoint_state(modules)
    counts = {}
    for key in state:
        component = key.split('.')[1]
        counts[component] = counts.get(component, 0) + 1
    # umT5-XXL: 24 blocks x 10 tensors + token embedding + final norm.
    assert counts['text_encoder'] == 242
    assert tuple(state['action_head.model.blocks.39.cross_attn.k_img.weight'].shape) == (5120, 5120)
    assert tuple(state['action_head.model.patch_embedding.weight'].shape) == (5120, 36, 1, 2, 2)
    assert tuple(state['action_head.model.state_encoder.layer1.W'].shape) == (1, 64, 1024)
    assert tuple(state['action_head.text_encoder.token_embedding.weight'].shape) == (256384, 4096)
    assert tuple(state['action_head.image_encoder.model.visual.pos_embedding'].shape) == (
        1,
        257,
        1280,
    )
    assert tuple(state['action_head.vae.model.conv1.weight'].shape) == (32, 32, 1, 1, 1)
    dit_params = sum(t.numel() for k, t in state.items() if k.startswith('action_head.model.'))
    assert 16.4e9 < dit_params < 16.6e9


@pytest.mark.parametrize('value', [float('nan'), float('inf'), -float('inf')])
@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float32])
def test_non_finite_tensor_is_refused_naming_it(checkpoint, tmp_path, value, dtype):
    folder = _copy(checkpoint, tmp_path / 'c')
    index, _ = _shards(folder)
    key = 'action_head.model.blocks.1.ffn.2.weight'
    shard = index['weight_map'][key]

    def poison(tensors):
        tensor = tensors[key].to(dtype).clone()
        tensor.view(-1)[tensor.numel() // 2] = value
        tensors[key] = tensor

    _rewrite_shard(folder, shard, poison)
    with pytest.raises(CheckpointError, match=rf'{key!r} in {shard} holds non-finite values'):
        load_weights(folder, _tiny_modules())


def test_float8_e4m3fn_nan_is_recognised():
    from dreamzero_ros.engine.checkpoint.weights import all_finite

    tensor = torch.tensor([1.0, -448.0, 0.0]).to(torch.float8_e4m3fn)
    assert all_finite(tensor)
    tensor.view(torch.uint8)[1] = 0xFF  # -NaN
    assert not all_finite(tensor)
