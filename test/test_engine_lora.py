# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""LoRA checkpoints: PEFT names undone, adapters merged at load, wrong bases refused."""

import dataclasses
import json

from lora_support import (
    DIT,
    PEFT_DIT,
    adapted_weights,
    read_tensors,
    write_lora_checkpoints,
    write_tensors,
)
import pytest
import torch

from dreamzero_ros.engine.checkpoint.lora import (
    CheckpointTensors,
    LoraSettings,
    MergedWeights,
    canonical_name,
)
from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint
from dreamzero_ros.engine.checkpoint.weights import open_checkpoint
from dreamzero_ros.engine.config import EngineConfig
from dreamzero_ros.errors import CheckpointError

SETTINGS = LoraSettings(rank=2, alpha=4.0)


@pytest.fixture(scope='module')
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp('lora')
    base = write_random_checkpoint(root / 'base', 'tiny', seed=3)
    return {'base': base, **write_lora_checkpoints(base, root, layers=2, rank=2, alpha=4.0)}


def _all(source) -> dict[str, torch.Tensor]:
    return {name: source.read(name) for name in sorted(source.names)}


def test_peft_names_map_to_the_engine_names():
    assert canonical_name(PEFT_DIT + 'blocks.3.self_attn.q.base_layer.weight') == (
        DIT + 'blocks.3.self_attn.q.weight'
    )
    assert canonical_name(PEFT_DIT + 'blocks.0.ffn.2.lora_B.default.weight') == (
        DIT + 'blocks.0.ffn.2.lora_B.default.weight'
    )
    assert canonical_name(PEFT_DIT + 'state_encoder.layer1.W') == DIT + 'state_encoder.layer1.W'
    assert canonical_name('action_head.vae.model.encoder.conv1.weight') == (
        'action_head.vae.model.encoder.conv1.weight'
    )


def test_lora_settings_come_from_the_runs_config(folders):
    config = json.loads((folders['lora_only'] / 'config.json').read_text())
    assert LoraSettings.from_config(config) == SETTINGS and SETTINGS.scaling == 2.0
    plain = json.loads((folders['base'] / 'config.json').read_text())
    assert LoraSettings.from_config(plain) is None
    config['action_head_cfg']['config']['lora_rank'] = 0
    with pytest.raises(CheckpointError, match='lora_rank must be a positive integer'):
        LoraSettings.from_config(config)


def test_lora_only_checkpoint_on_its_base_reads_as_the_merged_model(folders):
    merged = read_tensors(folders['merged'])
    with open_checkpoint(folders['lora_only'], base=folders['base']) as source:
        assert source.names == set(merged)
        tensors = _all(source)
    base = read_tensors(folders['base'])
    for name, tensor in tensors.items():
        torch.testing.assert_close(tensor.float(), merged[name].float(), rtol=0, atol=1e-6)
    changed = [n for n in tensors if not torch.equal(tensors[n].float(), base[n].float())]
    assert set(changed) == set(adapted_weights(base, 2)) | {
        n
        for n in base
        if n.startswith(tuple(DIT + p for p in ('state_', 'action_encoder', 'action_decoder')))
    }


def test_full_save_of_a_peft_model_reads_as_the_merged_model(folders):
    stored = read_tensors(folders['peft_full'])
    assert any('.base_layer.' in name for name in stored)
    merged = read_tensors(folders['merged'])
    with open_checkpoint(folders['peft_full']) as source:
        assert source.names == set(merged)
        for name in merged:
            torch.testing.assert_close(source.read(name).float(), merged[name], rtol=0, atol=1e-6)


def test_lora_only_checkpoint_without_base_says_what_to_supply(folders):
    with pytest.raises(CheckpointError, match='holds LoRA adapters only .*supply the base'):
        MergedWeights(CheckpointTensors(folders['lora_only'], SETTINGS))


def test_a_base_is_refused_for_a_full_checkpoint_and_as_an_adapter(folders):
    with pytest.raises(CheckpointError, match='holds full weights; a base checkpoint is only'):
        MergedWeights(CheckpointTensors(folders['merged']), CheckpointTensors(folders['base']))
    with pytest.raises(CheckpointError, match='is itself a LoRA-only checkpoint'):
        MergedWeights(
            CheckpointTensors(folders['lora_only'], SETTINGS),
            CheckpointTensors(folders['lora_only'], SETTINGS),
        )


def _tiny(**dit_changes) -> EngineConfig:
    tiny = EngineConfig.tiny()
    return tiny.replace(dit=dataclasses.replace(tiny.dit, **dit_changes))


def test_base_of_another_width_is_refused_naming_the_tensor(folders, tmp_path):
    base = write_random_checkpoint(tmp_path / 'wide', _tiny(dim=64, ffn_dim=128))
    with pytest.raises(CheckpointError) as error:
        MergedWeights(CheckpointTensors(folders['lora_only'], SETTINGS), CheckpointTensors(base))
    assert 'blocks.0.' in str(error.value) and 'is (64, 64)' in str(error.value)


def test_base_with_fewer_blocks_is_refused_naming_the_missing_weights(folders, tmp_path):
    base = write_random_checkpoint(tmp_path / 'shallow', _tiny(num_layers=1))
    with pytest.raises(
        CheckpointError, match=r'10 weight\(s\) adapted by .* are not in .*blocks\.1'
    ):
        MergedWeights(CheckpointTensors(folders['lora_only'], SETTINGS), CheckpointTensors(base))


def test_adapter_rank_must_match_the_run(folders):
    with pytest.raises(CheckpointError, match="do not have the run's rank 4"):
        MergedWeights(
            CheckpointTensors(folders['lora_only'], LoraSettings(rank=4, alpha=4.0)),
            CheckpointTensors(folders['base']),
        )


@pytest.mark.parametrize(
    ('edit', 'message'),
    [
        (lambda t, k: t.pop(k.replace('lora_A', 'lora_B')), 'lacks lora_B'),
        (lambda t, k: t.update({k: t[k].to(torch.int32)}), 'lora_A.* is not floating point'),
        (
            lambda t, k: t.update({k.replace('lora_A.default', 'lora_A.second'): t[k].clone()}),
            r"several LoRA adapters \['default', 'second'\]",
        ),
        (
            lambda t, k: t.update(
                {k.replace('lora_A.default.weight', 'lora_magnitude_vector'): t[k].clone()}
            ),
            'PEFT tensor .*lora_magnitude_vector.* is not supported',
        ),
    ],
)
def test_unsupported_peft_layouts_are_refused(folders, tmp_path, edit, message):
    tensors = read_tensors(folders['lora_only'])
    key = next(k for k in sorted(tensors) if 'lora_A' in k)
    edit(tensors, key)
    tmp_path.mkdir(exist_ok=True)
    write_tensors(tmp_path, tensors)
    with pytest.raises(CheckpointError, match=message):
        MergedWeights(CheckpointTensors(tmp_path, SETTINGS), CheckpointTensors(folders['base']))


def test_adapters_need_the_runs_lora_settings(folders):
    with pytest.raises(CheckpointError, match='names no LoRA run'):
        CheckpointTensors(folders['peft_full'])


@pytest.mark.parametrize('alpha', [float('nan'), float('inf')])
def test_a_non_finite_lora_alpha_is_refused(folders, alpha):
    config = json.loads((folders['lora_only'] / 'config.json').read_text())
    config['action_head_cfg']['config']['lora_alpha'] = alpha
    with pytest.raises(CheckpointError, match='lora_alpha must be a finite number'):
        LoraSettings.from_config(config)


@pytest.mark.parametrize('value', [float('nan'), float('inf')])
def test_an_adapter_with_non_finite_values_is_refused_naming_it(folders, tmp_path, value):
    import shutil

    folder = tmp_path / 'lora'
    shutil.copytree(folders['lora_only'], folder)
    tensors = read_tensors(folder)
    key = next(name for name in sorted(tensors) if '.lora_B.' in name)
    tensors[key] = tensors[key].clone()
    tensors[key].view(-1)[0] = value
    write_tensors(folder, tensors)
    with open_checkpoint(folder, base=folders['base']) as source:
        with pytest.raises(CheckpointError, match=rf'LoRA adapter {key!r} in .* non-finite'):
            _all(source)
