# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""ROS-free DreamZero inference engine (PyTorch).

``DreamZeroEngine.from_pretrained(folder, device=...)`` loads a checkpoint in the published
GEAR-Dreams/DreamZero-DROID layout; ``DreamZeroEngine.from_config(EngineConfig.tiny())`` builds a
random-weight model for tests.  ``dreamzero_ros.engine.testing.write_random_checkpoint`` writes
small checkpoints in the real layout.
"""

from .checkpoint import CheckpointError
from .config import ConfigError, EngineConfig
from .normalization import MetadataError
from .pipeline import DreamZeroEngine

__all__ = ['CheckpointError', 'ConfigError', 'DreamZeroEngine', 'EngineConfig', 'MetadataError']
