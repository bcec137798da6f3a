# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""One style for every console script: each names the options it shares with others alike.

Each tool's parser is built as its ``main`` builds it (no process per tool). Shared options
(the policy's source, the output folder, the API key file, the node's parameters, the engine
options) have the same flags, value names, types, choices and defaults everywhere; every option
has help that shows its default; no tool takes a checkpoint or an output folder positionally.
"""

import argparse
import importlib
from pathlib import Path
import re
import sys

from package_support import ROOT, console_scripts
import pytest

from dreamzero_ros.cli_options import HelpFormatter
from dreamzero_ros.core.config import node_config
from dreamzero_ros.engine.loader import RANDOM_PRESETS
from dreamzero_ros.engine.options import engine_option_specs
from dreamzero_ros.parameter_schema import dest, flag

#: Each console script's parser factory, in the module of its entry point.
PARSERS = {
    'dreamzero-openpi-server': 'build_parser',
    'dreamzero-replay': 'build_replay_parser',
    'dreamzero-make-bag': 'build_make_bag_parser',
    'dreamzero-export': 'build_parser',
    'dreamzero-live-replay': 'build_live_parser',
    'dreamzero-policy-node': 'build_parser',
    'dreamzero-demo-stream': 'build_parser',
    'dreamzero-sim-arm': 'build_parser',
    'dreamzero-sim': 'build_parser',
    'dreamzero-sim-eval': 'build_parser',
    'dreamzero-preflight': 'build_parser',
    'dreamzero-demo': 'build_parser',
    'dreamzero-engine-worker': 'build_parser',
}
#: Benchmarks that build engines: their engine options are the tools'.
BENCHMARKS = ('engine_benchmark', 'memory_benchmark', 'predicted_video')
#: Benchmarks whose --preset builds random weights on the device, so the 14B architecture too
#: (the engine worker offers the tools' presets: its rank 0 is one of them).
DEVICE_PRESETS = set(BENCHMARKS)
#: Benchmark options named as an engine option but meaning more: several step caches compared
#: in one run; the tensor-parallel ranks that torchrun starts (not rank 0).
BENCHMARK_OWN = {('engine_benchmark', '--step-cache'), ('engine_benchmark', '--tensor-parallel')}
#: Positional arguments a tool may take: the bag it reads (never a checkpoint or an output).
POSITIONALS = {'bag'}
#: A figure that goes stale: a speed ratio, a time per chunk, a percentage gain.
STALE_FIGURE = re.compile(
    r'\b\d+(\.\d+)?\s*x\b(?! ?\d)|\b\d+(\.\d+)?\s*ms\b|\d+\s*% (faster|slower|less)'
    r'|\d+\s*s (more|less|faster|slower)'
)


def _parsers() -> dict[str, argparse.ArgumentParser]:
    scripts = console_scripts()
    parsers = {}
    for script, target in scripts.items():
        module = importlib.import_module(target.split(':')[0])
        parsers[script] = getattr(module, PARSERS[script])()
    sys.path.insert(0, str(ROOT / 'benchmarks'))
    for name in BENCHMARKS:
        parsers[name] = importlib.import_module(name).build_parser()
    return parsers


@pytest.fixture(scope='module')
def parsers() -> dict[str, argparse.ArgumentParser]:
    return _parsers()


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {option: action for action in parser._actions for option in action.option_strings}


def _shown(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help of ``action`` as ``--help`` prints it (defaults filled in)."""
    formatter = parser._get_formatter()
    text = formatter._get_help_string(action)
    return text % {**vars(action), 'prog': parser.prog}


def test_every_console_script_has_its_parser_here():
    assert set(console_scripts()) == set(PARSERS)


def test_every_option_has_help_that_shows_its_default(parsers):
    missing = []
    for tool, parser in parsers.items():
        assert issubclass(parser.formatter_class, HelpFormatter), tool
        assert not parser.allow_abbrev, tool
        required = [action for action in parser._actions if action.required]  # no default
        for group in parser._mutually_exclusive_groups:
            if group.required:  # one of them must be given
                required += group._group_actions
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            name = '/'.join(action.option_strings) or action.dest
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f'{tool} {name}: no help')
            elif action.option_strings and action.nargs != 0 and action not in required:
                if 'default' not in _shown(parser, action):
                    missing.append(f'{tool} {name}: no default shown')
    assert not missing, '\n'.join(missing)


def test_no_tool_takes_a_checkpoint_or_an_output_positionally(parsers):
    for tool, parser in parsers.items():
        positionals = {action.dest for action in parser._actions if not action.option_strings}
        assert positionals <= POSITIONALS, tool


def _shape(action: argparse.Action) -> tuple:
    """Flags (earlier names a tool still accepts left out), dest, type, value name, choices."""
    flags = [option for option in action.option_strings if not option.startswith('--')]
    flags += [next(option for option in action.option_strings if option.startswith('--'))]
    choices = tuple(action.choices) if action.choices is not None else None
    return (tuple(flags), action.dest, action.type, action.metavar, choices)


@pytest.mark.parametrize(
    'option', ['--checkpoint', '--api-key-file', '--output', '--params-file',
               '--param', '--node-name', '--image-transport', '--debug']
)  # fmt: skip
def test_a_shared_option_is_shaped_alike_in_every_tool(parsers, option):
    tools = {tool: _options(parser)[option] for tool, parser in parsers.items()
             if option in _options(parser)}  # fmt: skip
    assert len(tools) >= 2, f'{option} is not shared: {sorted(tools)}'
    shapes = {tool: _shape(action) for tool, action in tools.items()}
    if option == '--image-transport':  # replay also reads whichever the bag has
        shapes = {tool: shape[:-1] for tool, shape in shapes.items()}
        assert all(set(action.choices) >= {'raw', 'compressed'} for action in tools.values())
    assert len(set(shapes.values())) == 1, shapes
    if option not in ('--node-name', '--image-transport'):
        assert all(action.default in (None, False, []) for action in tools.values()), option


def test_presets_are_the_same_choices_everywhere(parsers):
    from dreamzero_ros.engine.config import PRESETS

    seen = set()
    for tool, parser in parsers.items():
        action = _options(parser).get('--preset')
        if action is None:
            continue
        seen.add(tool)
        wanted = PRESETS if tool in DEVICE_PRESETS else RANDOM_PRESETS
        assert tuple(action.choices) == tuple(wanted), tool
        assert action.metavar is None and action.help, tool  # the choices are shown
        assert action.default in (None, 'small', 'droid_14b'), tool
    assert {'dreamzero-openpi-server', 'dreamzero-replay', 'dreamzero-demo'} <= seen


def test_engine_options_of_every_tool_are_the_declared_ones(parsers):
    specs = {flag(spec): spec for spec in engine_option_specs()}
    offered = {}
    for tool, parser in parsers.items():
        for option, action in _options(parser).items():
            spec = specs.get(option)
            if spec is None or (tool, option) in BENCHMARK_OWN:
                continue
            offered.setdefault(tool, []).append(spec.name)
            assert action.dest == dest(spec), (tool, option)
            assert action.default == spec.default, (tool, option)
            assert tuple(action.choices or ()) == spec.choices, (tool, option)
            assert spec.description.rstrip('.') in action.help, (tool, option)
    assert set(offered['dreamzero-replay']) == {spec.name for spec in specs.values()}
    assert {'device', 'dtype', 'fp8_linear', 'tensor_parallel'} <= set(
        offered['dreamzero-engine-worker']
    )
    assert {'device', 'dtype', 'num_threads'} <= set(offered['engine_benchmark'])


def test_output_parses_alike(parsers, tmp_path):
    for tool, argv in (
        ('dreamzero-replay', ['bag', '--preset', 'tiny']),
        ('dreamzero-make-bag', []),
        ('dreamzero-live-replay', ['bag']),
    ):
        for option in ('-o', '--output'):
            args = parsers[tool].parse_args([*argv, option, str(tmp_path / 'out')])
            assert args.output == tmp_path / 'out', tool
        assert parsers[tool].parse_args(argv).output is None, tool


def test_earlier_option_names_still_work(parsers, tmp_path):
    replay = parsers['dreamzero-replay'].parse_args(
        ['bag', '--preset', 'tiny', '--out', 'report', '--params', 'p.yaml']
    )
    assert (replay.output, replay.params_file) == (Path('report'), Path('p.yaml'))
    live = parsers['dreamzero-live-replay'].parse_args(['bag', '--record', 'chunks'])
    assert live.output == Path('chunks')
    for tool in ('dreamzero-demo', 'dreamzero-demo-stream'):
        args = parsers[tool].parse_args(['--transport', 'compressed'])
        assert args.image_transport == 'compressed', tool


def test_node_parameters_parse_alike(parsers):
    for tool in ('dreamzero-replay', 'dreamzero-make-bag', 'dreamzero-preflight'):
        extra = ['bag', '--preset', 'tiny'] if tool == 'dreamzero-replay' else []
        args = parsers[tool].parse_args(
            [*extra, '--params-file', 'p.yaml', '-p', 'max_age:=1.5', '--param', 'prompt=hi']
        )
        assert args.params_file == Path('p.yaml'), tool
        assert args.param == [('max_age', 1.5), ('prompt', 'hi')], tool


def test_help_quotes_no_figures_that_go_stale(parsers):
    texts = {f'node parameter {spec.name}': spec.description for spec in node_config.PARAMETERS}
    for tool, parser in parsers.items():
        texts[f'{tool} description'] = parser.description or ''
        texts[f'{tool} epilog'] = parser.epilog or ''  # the node's and sim arm's parameters
        for action in parser._actions:
            texts[f'{tool} {"/".join(action.option_strings)}'] = action.help or ''
    assert STALE_FIGURE.search('(GPU: ~30-40 s more warm-up, 0.69x the chunk time)')
    stale = {where: text for where, text in texts.items() if STALE_FIGURE.search(text)}
    assert not stale, stale
