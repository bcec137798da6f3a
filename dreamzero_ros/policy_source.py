# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The options every tool names its policy with: ``--checkpoint``, ``--preset``, ``--server``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dreamzero_ros.engine.loader import RANDOM_PRESETS

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
    default: str | None = None,
    presets: Sequence[str] = RANDOM_PRESETS,
    help_text: str = PRESET_HELP,
) -> None:
    """``--preset NAME``, one of ``presets`` (random weights of that architecture)."""
    parser.add_argument('--preset', choices=tuple(presets), default=default, help=help_text)


def add_policy_source(
    parser: argparse.ArgumentParser,
    *,
    remote: bool,
    required: bool = True,
    presets: Sequence[str] = RANDOM_PRESETS,
    preset_help: str = PRESET_HELP,
) -> None:
    """One of ``--checkpoint DIR``, ``--preset NAME`` and (``remote``) ``--server URL``."""
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument('--checkpoint', type=Path, metavar='DIR', help=CHECKPOINT_HELP)
    add_preset(group, presets=presets, help_text=preset_help)
    if remote:
        group.add_argument(
            '--server',
            metavar='ws://HOST:PORT',
            help='a remote OpenPI server (dreamzero-openpi-server) instead of a local model',
        )
