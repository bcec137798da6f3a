# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""EngineConfig presets and consistency checks."""

import pytest

from dreamzero_ros.engine.config import EngineConfig
from dreamzero_ros.errors import ConfigError


@pytest.mark.parametrize(
    ('changes', 'message'),
    [
        ({'action_horizon': 16}, 'action_horizon'),
        ({'dtype': 'int8'}, 'dtype'),
        ({'num_frames': 30}, 'num_frames'),
        ({'num_inference_steps': 8}, 'static step cache'),
        ({'max_sessions': 0}, 'max_sessions'),
    ],
)
def test_inconsistent_configs_are_refused(changes, message):
    with pytest.raises(ConfigError, match=message):
        EngineConfig.tiny(**changes)


def test_step_cache_by_mode_name():
    assert EngineConfig.tiny(step_cache='dynamic').step_cache.mode == 'dynamic'
    with pytest.raises(ConfigError, match='step cache mode'):
        EngineConfig.tiny(step_cache='sometimes')


def test_preset_lookup():
    assert EngineConfig.preset('tiny') == EngineConfig.tiny()
    with pytest.raises(ConfigError, match='unknown preset'):
        EngineConfig.preset('huge')
