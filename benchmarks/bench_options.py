# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Options of the benchmarks that build engines, shaped as every tool's.

``--preset`` names the architecture of seeded random weights built directly on the device (the
14B one included, unlike the tools, which write a preset's weights as a checkpoint); the
engine options a benchmark takes (``--device``, ``--dtype``, ``--num-threads``) are generated
from :class:`dreamzero_ros.engine.options.EngineOptions`, as the tools' are.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection

from dreamzero_ros.cli_options import add_preset, new_parser
from dreamzero_ros.engine.config import PRESETS
from dreamzero_ros.engine.loader import add_engine_arguments
from dreamzero_ros.engine.options import EngineOptions

__all__ = ['PRESET_HELP', 'benchmark_parser', 'engine_options']

PRESET_HELP = 'architecture of the seeded random weights (--seed), built on the device'


def benchmark_parser(
    prog: str, description: str, engine_options: Collection[str], preset: str = 'droid_14b'
) -> argparse.ArgumentParser:
    """A benchmark's parser with ``--preset`` (default ``preset``) and ``engine_options``."""
    parser = new_parser(prog, description)
    add_preset(parser, PRESETS, preset, PRESET_HELP)
    add_engine_arguments(parser, engine_options)
    parser.set_defaults(engine_option_names=tuple(engine_options))
    return parser


def engine_options(args: argparse.Namespace) -> EngineOptions:
    """The engine options of a command line made by :func:`benchmark_parser`, resolved."""
    return EngineOptions.from_arguments(args, args.engine_option_names).resolved()
