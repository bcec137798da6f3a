# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""ROS-free DreamZero inference engine (PyTorch).

``DreamZeroEngine.from_pretrained(folder, device=...)`` loads a checkpoint in the published
GEAR-Dreams/DreamZero layout (any embodiment; LoRA fine-tunes on their base);
:func:`.loader.load_engine` adds the defaults and options every entry point shares (random
weights of a preset included).
``DreamZeroEngine.from_config(EngineConfig.tiny())`` builds a random-weight model in memory;
:func:`.random_checkpoint.write_random_checkpoint` writes one in the real layout.
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
