# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The one engine loader: the OpenPI server's and replay's options reach the engine whole."""

import pytest

from dreamzero_ros.engine.loader import cached_random_checkpoint, load_engine
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.engine.speed.block_transforms import FusedQKVSelfAttention
from dreamzero_ros.openpi.cli import build_parser
from dreamzero_ros.replay.cli import build_replay_parser

SPEED = ['--fp8-linear', 'rowwise', '--attention-backend', 'math', '--step-cache', 'dynamic']


@pytest.mark.parametrize(
    'argv',
    [
        ['--preset', 'tiny', '--device', 'cpu', '--dtype', 'bfloat16', *SPEED],
        ['bag', '--preset', 'tiny', '--device', 'cpu', '--dtype', 'bfloat16', *SPEED],
    ],
    ids=['openpi-server', 'replay'],
)
def test_command_line_speed_options_reach_the_engine(argv):
    parser = build_parser() if argv[0] != 'bag' else build_replay_parser()
    args = parser.parse_args(argv)
    options = EngineOptions.from_arguments(args)
    engine = load_engine(None, options, preset=args.preset)
    try:
        config = engine.config
        assert config.options == options  # whole: every option as the command line gave it
        assert (config.options.fp8_linear, config.options.attention_backend) == ('rowwise', 'math')
        assert config.options.step_cache == 'dynamic' and not config.options.compile
        assert (config.device, config.dtype) == ('cpu', 'bfloat16')
        assert engine.denoiser.options is config.options
        blocks = engine.modules.dit.blocks
        assert all(isinstance(b.self_attn, FusedQKVSelfAttention) for b in blocks)
        assert engine.denoiser.block_runs.calls == (None, None)  # FP8, not compiled
    finally:
        engine.close()


def test_defaults_are_the_reference_path_in_float32_on_the_cpu():
    args = build_replay_parser().parse_args(['bag', '--preset', 'tiny', '--device', 'cpu'])
    engine = load_engine(None, EngineOptions.from_arguments(args), preset=args.preset)
    resolved = EngineOptions(device='cpu', dtype='float32')
    assert engine.config.options == resolved  # 'auto' resolved, every other option its default
    assert engine.config.options.step_cache == 'static'
    assert engine.denoiser.block_runs.calls == (None, None)
    assert not any(
        isinstance(b.self_attn, FusedQKVSelfAttention) for b in engine.modules.dit.blocks
    )


def test_a_checkpoint_or_a_preset_is_required(tmp_path):
    with pytest.raises(ValueError, match='either a checkpoint folder or a preset'):
        load_engine()
    with pytest.raises(ValueError, match='either a checkpoint folder or a preset'):
        load_engine(tmp_path, preset='tiny')
    with pytest.raises(ValueError, match='presets'):
        load_engine(preset='droid_14b')


def test_cached_random_checkpoint_loads_through_the_same_loader(tmp_path):
    folder, written = cached_random_checkpoint(tmp_path, 'tiny')
    assert written and not cached_random_checkpoint(tmp_path, 'tiny')[1]
    engine = load_engine(folder, EngineOptions(device='cpu'))
    assert engine.config.dit.dim == 32 and engine.config.dtype == 'float32'
