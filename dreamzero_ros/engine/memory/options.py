# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Memory options a user sets to fit a smaller GPU (the defaults: everything on the device).

* ``text_encoder``: where umT5 (5.7 B parameters, 11.4 GB in bf16) lives.  Prompt embeddings
  are cached per prompt, so it runs only when a prompt is new: ``device`` (default), ``cpu``
  (kept and run on the host) or ``offload`` (kept on the host, each block copied to the device
  just before it runs; :mod:`.offload`).
* ``image_encoder``: where CLIP ViT-H/14 (0.63 B parameters) lives: ``device`` (default) or
  ``offload`` (on the host, streamed block by block when a context window starts, every
  fourth chunk).
* ``kv_cache``: ``model`` (the model dtype, default) or ``fp8``: the DiT's self-attention K/V
  cache in FP8 e4m3 with a scale per token and head (:class:`.kv_cache.Fp8KVCache`), about
  half the memory of a session.

FP8 weights are the speed option ``fp8_linear`` (:mod:`.acceleration`): the DiT's block linears
are then held in FP8 instead of the model dtype.  :mod:`.memory_estimate` says what a
configuration needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from dreamzero_ros.engine.option_names import (
    IMAGE_ENCODER_PLACEMENTS,
    KV_CACHE_KINDS,
    TEXT_ENCODER_PLACEMENTS,
)
from dreamzero_ros.errors import ConfigError

__all__ = ['MemoryConfig']


@dataclass(frozen=True)
class MemoryConfig:
    """Where the engine keeps its encoders and in which precision its K/V cache."""

    text_encoder: str = 'device'
    kv_cache: str = 'model'
    image_encoder: str = 'device'

    def __post_init__(self) -> None:
        if self.text_encoder not in TEXT_ENCODER_PLACEMENTS:
            raise ConfigError(
                f'text_encoder must be one of {TEXT_ENCODER_PLACEMENTS}, got {self.text_encoder!r}'
            )
        if self.image_encoder not in IMAGE_ENCODER_PLACEMENTS:
            raise ConfigError(
                f'image_encoder must be one of {IMAGE_ENCODER_PLACEMENTS}, '
                f'got {self.image_encoder!r}'
            )
        if self.kv_cache not in KV_CACHE_KINDS:
            raise ConfigError(f'kv_cache must be one of {KV_CACHE_KINDS}, got {self.kv_cache!r}')
