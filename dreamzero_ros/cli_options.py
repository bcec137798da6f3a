# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The one style of every console script: its parser, and the options several tools share.

:func:`new_parser` makes a tool's parser: no abbreviated options (``--api-key`` must not pass
for ``--api-key-file``) and :class:`HelpFormatter`, which shows each option's default in
``--help``. The options more than one tool takes are declared here once, so that they are named,
shaped and explained alike everywhere: the policy's source (:func:`add_policy_source`:
``--checkpoint DIR``, ``--preset NAME``, ``--server URL``), :func:`add_output`
(``-o/--output DIR``), :func:`add_api_key_file`, :func:`add_node_parameter_options`
(``--params-file``, ``-p/--param``) and :func:`add_node_name`; the engine's options are
:func:`~dreamzero_ros.engine.loader.add_engine_arguments`. Nothing here imports ROS, torch or
the rest of the package (the engine's worker uses it too).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import yaml

__all__ = [
    'HelpFormatter',
    'ListingHelpFormatter',
    'ToolParser',
    'add_api_key_file',
    'add_image_transport',
    'add_node_name',
    'add_node_parameter_options',
    'add_output',
    'add_policy_source',
    'add_preset',
    'new_parser',
    'parse_parameter',
    'seconds',
]


class HelpFormatter(argparse.HelpFormatter):
    """``--help`` with each option's default, where its help does not state it already.

    On/off flags (``store_true``, ``--no-x``) are off unless their help says otherwise; an
    option without a default says in its help what happens when it is not given.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ''
        if (
            'default' in text
            or action.default in (None, argparse.SUPPRESS)
            or not action.option_strings
            or action.nargs == 0
        ):
            return text
        return f'{text} (default: %(default)s)'


class ListingHelpFormatter(argparse.RawDescriptionHelpFormatter, HelpFormatter):
    """:class:`HelpFormatter` that prints the description and epilog as written (listings)."""


class ToolParser(argparse.ArgumentParser):
    """argparse's parser whose mistakes end in two lines: a short usage, then the error.

    argparse's own usage of a tool with many options spans dozens of lines before the one that
    matters; here it is the tool's positionals and a pointer to ``--help`` (or the ``usage``
    given).
    """

    def short_usage(self) -> str:
        """``usage: prog [options] POSITIONALS (--help lists the options)``, one line."""
        if self.usage is not None:
            return 'usage: ' + self.usage % {'prog': self.prog}
        formatter = self._get_formatter()
        positionals = [
            formatter._format_args(action, action.dest)  # noqa: SLF001 - argparse's own form
            for action in self._get_positional_actions()
            if action.help is not argparse.SUPPRESS
        ]
        return ' '.join(
            ['usage:', self.prog, '[options]', *positionals, '(--help lists the options)']
        )

    def error(self, message: str) -> NoReturn:
        """Print the short usage and ``prog: error: message``; exit 2."""
        self.exit(2, f'{self.short_usage()}\n{self.prog}: error: {message}\n')


def new_parser(prog: str, description: str, **settings: Any) -> argparse.ArgumentParser:
    """The parser of console script ``prog``, in the one style of every tool."""
    settings.setdefault('formatter_class', HelpFormatter)
    return ToolParser(prog=prog, description=description, allow_abbrev=False, **settings)


PRESET_HELP = (
    'random weights of a preset architecture instead of a checkpoint: tiny (seconds per bag on '
    'a CPU), small (the published architecture scaled down; minutes on a CPU); the actions '
    'mean nothing'
)
CHECKPOINT_HELP = (
    'DreamZero checkpoint folder (config.json, safetensors shards, experiment_cfg/, '
    'tokenizer/spiece.model; docs/getting_started.md)'
)


def add_preset(
    parser: argparse.ArgumentParser | Any,
    presets: Sequence[str],
    default: str | None = None,
    help_text: str = PRESET_HELP,
) -> None:
    """``--preset NAME``, one of ``presets`` (random weights of that architecture)."""
    parser.add_argument('--preset', choices=tuple(presets), default=default, help=help_text)


def add_policy_source(
    parser: argparse.ArgumentParser,
    presets: Sequence[str],
    *,
    remote: bool,
    preset_help: str = PRESET_HELP,
) -> Any:
    """One of ``--checkpoint DIR``, ``--preset NAME`` and (``remote``) ``--server URL``.

    ``presets``: the preset names a tool can build random weights of (the tools:
    :data:`.engine.loader.RANDOM_PRESETS`). Returns the group, for a tool's own policy source.
    """
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument('--checkpoint', type=Path, metavar='DIR', help=CHECKPOINT_HELP)
    add_preset(group, presets, help_text=preset_help)
    if remote:
        group.add_argument(
            '--server',
            metavar='ws://HOST:PORT',
            help='a remote OpenPI server (dreamzero-openpi-server) instead of a local model',
        )
    return group


def add_output(
    parser: argparse.ArgumentParser | Any,
    what: str,
    default: str,
    *aliases: str,
    metavar: str = 'DIR',
) -> None:
    """``-o/--output DIR``: the folder a tool writes (``what``).

    Args:
        parser: the parser or argument group.
        what: what the folder holds, e.g. ``the report, metrics and video``; say if it must be
            new.
        default: where it goes when not given, as help text (e.g. ``replay_<bag>``).
        aliases: earlier names of the option that still work (e.g. ``--out``).
        metavar: the value's name in ``--help``.

    """
    parser.add_argument(
        '-o',
        '--output',
        *aliases,
        dest='output',
        type=Path,
        default=None,
        metavar=metavar,
        help=f'folder for {what} (default: {default})',
    )


def add_api_key_file(parser: argparse.ArgumentParser | Any, role: str, env_var: str) -> None:
    """``--api-key-file FILE``: the file holding an API key (``role``), never the key itself.

    A key on the command line could be read by every user of the machine in the process list.
    """
    parser.add_argument(
        '--api-key-file',
        type=Path,
        default=None,
        metavar='FILE',
        help=f'file holding the API key {role} on one line, never the key itself (which every '
        f'user of the machine could read in the process list) (default: ${env_var} if set, '
        'else no key)',
    )


def parse_parameter(text: str) -> tuple[str, Any]:
    """``NAME:=VALUE`` or ``NAME=VALUE`` (VALUE in YAML, as ``--ros-args -p``) -> (name, value).

    Raises:
        ValueError: neither form, or an empty name.

    """
    name, separator, value = text.partition(':=')
    if not separator:
        name, separator, value = text.partition('=')
    if not separator or not name.strip():
        raise ValueError(f'expected NAME:=VALUE, got {text!r}')
    return name.strip(), yaml.safe_load(value)


def _parameter(text: str) -> tuple[str, Any]:
    try:
        return parse_parameter(text)
    except (ValueError, yaml.YAMLError) as error:  # YAML's message spans lines
        raise argparse.ArgumentTypeError(' '.join(str(error).split())) from error


def add_node_parameter_options(parser: argparse.ArgumentParser | Any, *aliases: str) -> None:
    """``--params-file FILE`` and ``-p/--param NAME:=VALUE``: the policy node's parameters.

    ``aliases``: earlier names of ``--params-file`` that still work (e.g. ``--params``).
    """
    parser.add_argument(
        '--params-file',
        *aliases,
        dest='params_file',
        type=Path,
        default=None,
        metavar='FILE',
        help="the policy node's parameter file (ros__parameters YAML, as for ros2 run "
        '--params-file) (default: none, the node defaults)',
    )
    parser.add_argument(
        '-p',
        '--param',
        dest='param',
        type=_parameter,
        action='append',
        default=[],
        metavar='NAME:=VALUE',
        help='set one node parameter, VALUE in YAML, as --ros-args -p does (NAME=VALUE works '
        'too; repeatable), e.g. -p max_age:=1.0 (default: none)',
    )


def seconds(maximum: float, minimum: float = 0.0) -> Callable[[str], float]:
    """An option type: a finite number of seconds above ``minimum``, at most ``maximum``.

    ``nan``, ``inf``, negative and absurd values are refused as a bad command line, naming the
    range, before the tool starts waiting for them.
    """

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f'expected seconds, got {text!r}') from None
        if not minimum < value <= maximum:  # False for nan
            raise argparse.ArgumentTypeError(
                f'expected seconds above {minimum:g} and at most {maximum:g}, got {text!r}'
            )
        return value

    parse.__name__ = 'seconds'
    return parse


def add_node_name(parser: argparse.ArgumentParser | Any, default: str, use: str) -> None:
    """``--node-name NAME``: the policy node's name (``use``: what the tool needs it for)."""
    parser.add_argument(
        '--node-name', default=default, metavar='NAME', help=f'policy node name ({use})'
    )


def add_image_transport(
    parser: argparse.ArgumentParser | Any,
    choices: Sequence[str],
    default: str,
    help_text: str,
    *aliases: str,
) -> None:
    """``--image-transport NAME``: how camera images travel (the node's ``image_transport``).

    ``aliases``: earlier names of the option that still work (e.g. ``--transport``).
    """
    parser.add_argument(
        '--image-transport',
        *aliases,
        dest='image_transport',
        default=default,
        choices=tuple(choices),
        help=help_text,
    )
