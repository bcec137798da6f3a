# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""ROS-free DreamZero inference engine (PyTorch).

``DreamZeroEngine.from_pretrained(folder, options)`` loads a checkpoint in the published
GEAR-Dreams/DreamZero layout (any embodiment; LoRA fine-tunes on their base) with the user's
:class:`~.options.EngineOptions`, whole; :func:`.loader.load_engine` is the one entry point of
every tool (random weights of a preset included).  ``DreamZeroEngine.from_config(
EngineConfig.tiny())`` builds a random-weight model in memory;
:func:`.random_checkpoint.write_random_checkpoint` writes one in the real layout.

The folders are layers, lowest first (``test_package_layers.py`` holds every import to it):
``option_names``, ``options``; ``networks`` (DiT, attention, K/V cache, VAE, encoders),
``embodiment``, ``step_cache``; ``config``; ``speed`` and ``parallel`` (acting on the networks
from outside); ``memory`` (building them where they run); ``checkpoint``; ``pipeline`` (the
engine); ``loader``; ``workers`` (the worker ranks of a multi-process engine).
"""

from typing import TYPE_CHECKING

from dreamzero_ros.errors import CheckpointError, ConfigError, EmbodimentError, MetadataError

if TYPE_CHECKING:
    from dreamzero_ros.engine.config import EngineConfig
    from dreamzero_ros.engine.pipeline.engine import DreamZeroEngine

__all__ = [
    'CheckpointError',
    'ConfigError',
    'DreamZeroEngine',
    'EmbodimentError',
    'EngineConfig',
    'MetadataError',
]


def __getattr__(name: str) -> object:
    """``DreamZeroEngine`` and ``EngineConfig`` on first use: they import torch."""
    if name == 'DreamZeroEngine':
        from dreamzero_ros.engine.pipeline.engine import DreamZeroEngine

        return DreamZeroEngine
    if name == 'EngineConfig':
        from dreamzero_ros.engine.config import EngineConfig

        return EngineConfig
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
