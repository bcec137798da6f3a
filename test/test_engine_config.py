# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""EngineConfig presets and consistency checks."""

import dataclasses

import pytest

from dreamzero_ros.engine.config import EngineConfig, Sampling
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.errors import ConfigError


@pytest.mark.parametrize(
    ('changes', 'message'),
    [
        ({'action_horizon': 16}, 'action_horizon'),
        ({'num_frames': 30}, 'num_frames'),
        ({'sampling': Sampling(num_inference_steps=8)}, 'static step cache'),
        ({'max_sessions': 0}, 'max_sessions'),
    ],
)
def test_inconsistent_configs_are_refused(changes, message):
    with pytest.raises(ConfigError, match=message):
        EngineConfig.tiny(**changes)


def test_sampling_is_checked():
    with pytest.raises(ConfigError, match='cfg_scale must be > 0'):
        Sampling(cfg_scale=0.0)
    with pytest.raises(ConfigError, match='num_inference_steps'):
        Sampling(num_inference_steps=0)


def test_the_options_are_held_whole_their_auto_device_and_dtype_resolved():
    chosen = EngineOptions(device='cpu', dtype='float32', step_cache='dynamic')
    assert EngineConfig.tiny(options=chosen).options is chosen
    resolved = EngineConfig.tiny(options=EngineOptions(step_cache='dynamic')).options
    assert resolved == dataclasses.replace(chosen, device=resolved.device, dtype=resolved.dtype)
    assert 'auto' not in (resolved.device, resolved.dtype)
    with pytest.raises(ConfigError, match='dtype: must be one of'):
        EngineOptions(dtype='int8')
    with pytest.raises(ConfigError, match='step_cache: must be one of'):
        EngineOptions(step_cache='sometimes')


def test_preset_lookup():
    assert EngineConfig.preset('tiny') == EngineConfig.tiny()
    with pytest.raises(ConfigError, match='unknown preset'):
        EngineConfig.preset('huge')
