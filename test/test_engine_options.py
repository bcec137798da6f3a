# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Each engine option declared once: node parameters, tool options and launch arguments agree."""

import argparse
import ast

from node_support import REPO
import pytest

from dreamzero_ros.core.config import node_config
from dreamzero_ros.core.config.launch_plan import ENGINE_LAUNCH_ARGUMENTS, engine_launch_arguments
from dreamzero_ros.engine import ConfigError
from dreamzero_ros.engine.options import ENGINE_OPTION_SECTIONS, EngineOptions, engine_option_specs
from dreamzero_ros.openpi.cli import build_parser as build_server_parser
from dreamzero_ros.parameter_schema import dest, flag
from dreamzero_ros.replay.cli import build_replay_parser

TOOLS = {'dreamzero-openpi-server': build_server_parser, 'dreamzero-replay': build_replay_parser}


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {option: action for action in parser._actions for option in action.option_strings}


def test_node_engine_parameters_are_the_declared_options():
    node = {spec.name: spec for spec in node_config.PARAMETERS}
    for spec in engine_option_specs():
        declared = node[f'engine.{spec.name}']
        assert (declared.kind, declared.default, declared.choices, declared.range) == (
            spec.kind,
            spec.default,
            spec.choices,
            spec.range,
        ), spec.name
        assert declared.description == spec.description, spec.name


def test_every_option_is_in_one_command_line_section():
    shown = [name for names in ENGINE_OPTION_SECTIONS.values() for name in names]
    assert sorted(shown) == sorted(spec.name for spec in engine_option_specs())


@pytest.mark.parametrize('tool', sorted(TOOLS))
def test_every_tool_offers_every_option_with_its_default_and_choices(tool):
    parser = TOOLS[tool]()
    actions = _actions(parser)
    help_text = parser.format_help()
    for spec in engine_option_specs():
        action = actions[flag(spec)]
        assert action.dest == dest(spec)
        assert action.default == spec.default, spec.name
        assert tuple(action.choices or ()) == spec.choices, spec.name
        assert action.help and 'default' in action.help, spec.name
    assert '{off,rowwise,tensorwise}' in help_text
    assert "(default: 'static')" in help_text


def test_command_line_values_are_checked_as_parameters_are(capsys):
    parser = build_replay_parser()
    base = ['bag', '--preset', 'tiny']
    args = parser.parse_args([*base, '--tensor-parallel', '2', '--fp8-linear', 'rowwise'])
    options = EngineOptions.from_arguments(args)
    assert (options.tensor_parallel, options.fp8_linear) == (2, 'rowwise')
    defaults = EngineOptions.from_arguments(parser.parse_args(base))
    assert defaults == EngineOptions()
    # the node parameter's range, not a CLI-only rule: tensor_parallel in [1, 8]
    for bad in (['--tensor-parallel', '9'], ['--cfg-parallel', '3'], ['--memory-budget-gib', '-1']):
        with pytest.raises(SystemExit):
            parser.parse_args([*base, *bad])
        assert 'outside the range' in capsys.readouterr().err
    assert parser.parse_args([*base, '--no-compile']).compile is False
    assert parser.parse_args([*base, '--compile']).compile is True


def test_node_defaults_load_the_engine_the_tools_load():
    node = node_config.build_settings({}).engine
    assert isinstance(node, EngineOptions)  # the node's settings are the options, whole
    assert node.engine_fields() == EngineOptions().engine_fields()


def test_options_are_checked_when_made_and_read_back_from_their_command_line():
    with pytest.raises(ValueError, match='tensor_parallel: 9 is outside the range'):
        EngineOptions(tensor_parallel=9)
    chosen = EngineOptions(
        device='cuda:1',
        compile=True,
        fp8_linear='rowwise',
        encoder_dir='',
        prompt_template='-{instruction}',
        memory_budget_gib=1.5,
        worker_timeout=30.0,
    )
    parser = build_replay_parser()
    args = parser.parse_args(['bag', '--preset', 'tiny', *chosen.arguments()])
    assert EngineOptions.from_arguments(args) == chosen
    assert '--no-compile' in EngineOptions().arguments()


@pytest.mark.parametrize(
    ('values', 'message'),
    [
        ({'fp8_linear': 'int4'}, 'fp8_linear: must be one of'),
        ({'attention_backend': 'fa4'}, 'attention_backend: must be one of'),
        ({'compile': 'eager'}, 'compile: expected a bool'),
        ({'text_encoder': 'disk'}, 'text_encoder: must be one of'),
        ({'image_encoder': 'cpu'}, 'image_encoder: must be one of'),
        ({'kv_cache': 'int8'}, 'kv_cache: must be one of'),
        ({'memory_budget_gib': -1.0}, 'memory_budget_gib: -1.0 is outside the range'),
    ],
)
def test_bad_option_values_are_refused_naming_the_option(values, message):
    with pytest.raises(ConfigError, match=message):
        EngineOptions(**values)


def test_launch_arguments_are_generated_from_the_parameters():
    arguments = engine_launch_arguments()
    node = {spec.name: spec for spec in node_config.PARAMETERS}
    assert tuple(arguments) == ENGINE_LAUNCH_ARGUMENTS
    for name, (default, description) in arguments.items():
        assert default == ''  # keeps the config file's value
        assert description.startswith(node[f'engine.{name}'].description)
    # the launch file declares exactly these (it cannot be imported without launch_ros)
    tree = ast.parse((REPO / 'launch' / 'dreamzero.launch.py').read_text())
    unpacked = [
        value.func.id
        for node_ in ast.walk(tree)
        if isinstance(node_, ast.Dict)
        for key, value in zip(node_.keys, node_.values, strict=True)
        if key is None and isinstance(value, ast.Call)
    ]
    assert unpacked == ['engine_launch_arguments']


def test_the_engine_holds_the_declared_options_whole():
    """No dataclass of the engine declares an option again: the config holds the options."""
    import dataclasses

    from dreamzero_ros.engine.config import EngineConfig, Sampling
    from dreamzero_ros.engine.pipeline.denoise import ChunkDenoiser
    from dreamzero_ros.engine.step_cache import StepCacheConfig
    from dreamzero_ros.engine.workers.launch import EngineRanks

    names = {spec.name for spec in engine_option_specs()}
    for cls in (EngineConfig, Sampling, StepCacheConfig, EngineRanks):
        again = names & {item.name for item in dataclasses.fields(cls)}
        assert not again, f'{cls.__name__} declares {sorted(again)} again'
    chosen = EngineOptions(device='cpu', dtype='float32', step_cache='full', kv_cache='fp8')
    config = EngineConfig.tiny(options=chosen)
    assert config.options is chosen
    from dreamzero_ros.engine.memory.placement import build_dit

    denoiser = ChunkDenoiser(build_dit(config, seed=0), config.sampling, config.options)
    assert denoiser.options is chosen and denoiser.sampling is config.sampling
