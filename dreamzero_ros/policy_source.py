# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The options every tool names its policy with: ``--checkpoint``, ``--preset``, ``--server``."""

from __future__ import annotations

import argparse
from pathlib import Path

from dreamzero_ros.engine.loader import RANDOM_PRESETS

PRESET_HELP = (
    'random weights of a preset architecture instead of a checkpoint: tiny (seconds per bag on '
    'a CPU), small (the published architecture scaled down; minutes on a CPU); the actions '
    'mean nothing'
)


def add_policy_source(
    parser: argparse.ArgumentParser, *, remote: bool, required: bool = True
) -> None:
    """One of ``--checkpoint DIR``, ``--preset NAME`` and (``remote``) ``--server URL``."""
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument(
        '--checkpoint',
        type=Path,
        metavar='DIR',
        help='DreamZero checkpoint folder (config.json, safetensors shards, experiment_cfg/, '
        'tokenizer/spiece.model; docs/getting_started.md)',
    )
    group.add_argument('--preset', choices=RANDOM_PRESETS, help=PRESET_HELP)
    if remote:
        group.add_argument(
            '--server',
            metavar='ws://HOST:PORT',
            help='a remote OpenPI server (dreamzero-openpi-server) instead of a local model',
        )
