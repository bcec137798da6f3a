# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Wan2.1 encoder files named in config.json: found in local folders only, read by name."""

import pytest
import torch

from dreamzero_ros.engine.checkpoint.encoder_files import EncoderFile, resolve_encoder_file
from dreamzero_ros.engine.checkpoint.layout import checkpoint_state
from dreamzero_ros.engine.checkpoint.upstream_config import config_to_json
from dreamzero_ros.engine.config import EngineConfig
from dreamzero_ros.engine.pipeline.engine import build_modules
from dreamzero_ros.errors import CheckpointError

T5 = 'models_t5_umt5-xxl-enc-bf16.pth'


def _config(recorded: str | None) -> dict:
    config = config_to_json(EngineConfig.tiny())
    config['action_head_cfg']['config']['text_encoder_cfg']['text_encoder_pretrained_path'] = (
        recorded
    )
    return config


def test_recorded_training_machine_path_is_looked_up_by_name(tmp_path):
    checkpoint, encoders = tmp_path / 'checkpoint', tmp_path / 'encoders'
    checkpoint.mkdir()
    encoders.mkdir()
    (checkpoint / 'renamed_t5.pth').write_bytes(b'')
    config = _config('/mnt/cluster/user/Wan2.1-I2V-14B-480P/renamed_t5.pth')
    found = resolve_encoder_file(config, 'text_encoder', [encoders, checkpoint])
    assert found == checkpoint / 'renamed_t5.pth'
    (encoders / 'renamed_t5.pth').write_bytes(b'')
    assert resolve_encoder_file(config, 'text_encoder', [encoders, checkpoint]) == (
        encoders / 'renamed_t5.pth'
    )
    windows = _config('D:\\models\\Wan2.1\\renamed_t5.pth')
    assert resolve_encoder_file(windows, 'text_encoder', [checkpoint]).name == 'renamed_t5.pth'


def test_wan_file_name_is_the_fallback(tmp_path):
    (tmp_path / T5).write_bytes(b'')
    assert resolve_encoder_file(_config(None), 'text_encoder', [tmp_path]) == tmp_path / T5
    assert resolve_encoder_file(_config('/elsewhere/other.pth'), 'text_encoder', [tmp_path]) == (
        tmp_path / T5
    )


def test_a_file_at_the_recorded_path_itself_is_not_used(tmp_path):
    recorded = tmp_path / 'training_machine' / T5
    recorded.parent.mkdir()
    recorded.write_bytes(b'')
    empty = tmp_path / 'checkpoint'
    empty.mkdir()
    with pytest.raises(CheckpointError) as error:
        resolve_encoder_file(_config(str(recorded)), 'text_encoder', [empty])
    message = str(error.value)
    assert f'{T5} (recorded as {str(recorded)!r}) is not in {empty}' in message
    assert 'no text_encoder tensors' in message


def test_encoder_file_tensors_take_the_checkpoint_names(tmp_path):
    modules = build_modules(EngineConfig.tiny(), seed=1)
    state = {k: v.clone() for k, v in modules.text_encoder.state_dict().items()}
    torch.save(state, tmp_path / T5)
    torch.save(state, tmp_path / 'legacy.pth', _use_new_zipfile_serialization=False)
    expected = checkpoint_state({'text_encoder': modules.text_encoder})
    for path in (tmp_path / T5, tmp_path / 'legacy.pth'):
        source = EncoderFile(path, 'text_encoder')
        assert source.names == set(expected)
        for name, tensor in expected.items():
            assert torch.equal(source.read(name), tensor)
            assert source.shape(name) == tuple(tensor.shape)


def test_damaged_encoder_files_are_refused(tmp_path):
    (tmp_path / 'garbage.pth').write_bytes(b'not a pickle')
    with pytest.raises(CheckpointError, match='garbage.pth is unreadable'):
        EncoderFile(tmp_path / 'garbage.pth', 'vae')
    torch.save([torch.ones(2)], tmp_path / 'list.pth')
    with pytest.raises(CheckpointError, match='is not a state dict of tensors'):
        EncoderFile(tmp_path / 'list.pth', 'vae')
