# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Engine settings: model shapes, sampling, speed and resource limits.

:class:`EngineConfig` composes the shapes of the four networks (:class:`DiTConfig`,
:class:`T5Config`, :class:`CLIPConfig`, :class:`VAEConfig`) and the sampling settings upstream
hard-codes (16 UniPC steps, shift 5, CFG 5, seed 1140, DiT on 8 steps).  The robot's cameras,
state and actions are the checkpoint's :class:`~.embodiment.Embodiment`, which
:meth:`EngineConfig.check_embodiment` fits to the model.

Presets:

* :meth:`EngineConfig.droid_14b` -- the published GEAR-Dreams/DreamZero-DROID model;
* :meth:`EngineConfig.small` -- a few-million-parameter model of the same structure for the
  embedded demo (seconds per chunk on a laptop CPU);
* :meth:`EngineConfig.tiny` -- the smallest model of the same structure, for tests.

A checkpoint's ``config.json`` is read into an :class:`EngineConfig` by :mod:`.upstream_config`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch

from dreamzero_ros.engine.embodiment import Embodiment
from dreamzero_ros.engine.memory.options import MemoryConfig
from dreamzero_ros.engine.networks.dit import DiTConfig
from dreamzero_ros.engine.networks.image_encoder import CLIPConfig
from dreamzero_ros.engine.networks.text_encoder import T5Config
from dreamzero_ros.engine.networks.vae_network import SPATIAL_FACTOR, TEMPORAL_FACTOR, VAEConfig
from dreamzero_ros.engine.option_names import DTYPE_NAMES
from dreamzero_ros.engine.pipeline.model_inputs import NEGATIVE_PROMPT
from dreamzero_ros.engine.speed.acceleration import AccelerationConfig
from dreamzero_ros.engine.speed.step_cache import StepCacheConfig
from dreamzero_ros.errors import ConfigError, EmbodimentError

__all__ = ['DTYPES', 'EngineConfig', 'PRESETS']

#: Accepted ``dtype`` names.
DTYPES: dict[str, torch.dtype] = {name: getattr(torch, name) for name in DTYPE_NAMES}


@dataclass(frozen=True)
class EngineConfig:
    """Everything needed to build and run the engine.

    Attributes:
        dit: causal DiT shape.
        text_encoder: umT5 encoder shape.
        image_encoder: CLIP vision tower shape.
        vae: Wan VAE shape.
        action_horizon: action rows per chunk (``dit.num_action_per_block``).
        num_frames: video frames of a context window's I2V conditioning (33 -> 9 latents).
        max_state_dim: padded state width (``dit.max_state_dim``).
        max_action_dim: padded action width (``dit.action_dim``).
        num_inference_steps: UniPC steps per chunk.
        shift: sigma shift of the schedule.
        cfg_scale: classifier-free guidance scale of the video velocity (1 disables CFG).
        seed: seed of the initial noise (the same noise every chunk, as upstream).
        step_cache: which steps run the DiT: a :class:`StepCacheConfig`, or just its mode name
            (``full``, ``static`` = 8 of 16 steps, ``dynamic``).
        negative_prompt: text of the unconditional branch.
        dtype: weight and activation dtype name (``bfloat16``, ``float16``, ``float32``).
        device: torch device the engine runs on.
        max_sessions: sessions kept at once (least recently used ones are dropped).
        max_cached_prompts: prompt encodings kept at once.
        acceleration: the speed options (``compile``, ``fp8_linear``, ``attention_backend``,
            ``compile_cache``; see :class:`~.acceleration.AccelerationConfig`); the default is
            the reference path.  FP8 linears need ``bfloat16``.
        memory: where the text encoder lives and the K/V cache's precision
            (:class:`~.options.MemoryConfig`); the default keeps everything on the device.

    """

    dit: DiTConfig = field(default_factory=DiTConfig.full_14b)
    text_encoder: T5Config = field(default_factory=T5Config.umt5_xxl)
    image_encoder: CLIPConfig = field(default_factory=CLIPConfig.vit_h_14)
    vae: VAEConfig = field(default_factory=VAEConfig.wan21)
    action_horizon: int = 24
    num_frames: int = 33
    max_state_dim: int = 64
    max_action_dim: int = 32
    num_inference_steps: int = 16
    shift: float = 5.0
    cfg_scale: float = 5.0
    seed: int = 1140
    step_cache: StepCacheConfig | str = field(default_factory=StepCacheConfig)
    negative_prompt: str = NEGATIVE_PROMPT
    dtype: str = 'bfloat16'
    device: str = 'cpu'
    max_sessions: int = 4
    max_cached_prompts: int = 16
    acceleration: AccelerationConfig = field(default_factory=AccelerationConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)

    def __post_init__(self) -> None:
        if isinstance(self.step_cache, str):
            try:
                object.__setattr__(self, 'step_cache', StepCacheConfig(mode=self.step_cache))
            except ValueError as error:
                raise ConfigError(str(error)) from error
        if not isinstance(self.acceleration, AccelerationConfig):
            raise ConfigError('acceleration must be an AccelerationConfig')
        if not isinstance(self.memory, MemoryConfig):
            raise ConfigError('memory must be a MemoryConfig')
        if self.acceleration.fp8_linear != 'off' and self.dtype != 'bfloat16':
            raise ConfigError(f'fp8_linear needs dtype bfloat16, got {self.dtype!r}')
        dit = self.dit
        checks = [
            (self.dtype in DTYPES, f'dtype must be one of {sorted(DTYPES)}, got {self.dtype!r}'),
            (
                self.action_horizon == dit.num_action_per_block,
                f'action_horizon {self.action_horizon} != dit.num_action_per_block '
                f'{dit.num_action_per_block}',
            ),
            (
                self.max_state_dim == dit.max_state_dim,
                f'max_state_dim {self.max_state_dim} != dit.max_state_dim {dit.max_state_dim}',
            ),
            (
                self.max_action_dim == dit.action_dim,
                f'max_action_dim {self.max_action_dim} != dit.action_dim {dit.action_dim}',
            ),
            (
                dit.text_dim == self.text_encoder.dim,
                f'dit.text_dim {dit.text_dim} != text_encoder.dim {self.text_encoder.dim}',
            ),
            (
                dit.text_len == self.text_encoder.text_len,
                f'dit.text_len {dit.text_len} != text_encoder.text_len',
            ),
            (
                dit.clip_dim == self.image_encoder.dim,
                f'dit.clip_dim {dit.clip_dim} != image_encoder.dim {self.image_encoder.dim}',
            ),
            (
                dit.out_dim == self.vae.z_dim and dit.in_dim == 2 * self.vae.z_dim + 4,
                f'dit in/out dims ({dit.in_dim}, {dit.out_dim}) do not fit VAE z_dim '
                f'{self.vae.z_dim} (in = 2 z + 4 mask channels)',
            ),
            (
                (self.num_frames - 1) % TEMPORAL_FACTOR == 0
                and self.window_latent_frames >= dit.num_frame_per_block + 1,
                f'num_frames {self.num_frames} must be 1 + 4k and cover the first chunk',
            ),
            (self.num_inference_steps >= 1, 'num_inference_steps must be >= 1'),
            (self.shift > 0, 'shift must be > 0'),
            (self.cfg_scale > 0, 'cfg_scale must be > 0'),
            (self.max_sessions >= 1, 'max_sessions must be >= 1'),
            (self.max_cached_prompts >= 1, 'max_cached_prompts must be >= 1'),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        if self.step_cache.mode == 'static' and self.num_inference_steps != 16:
            raise ConfigError('the static step cache is defined for 16 inference steps')

    @property
    def torch_dtype(self) -> torch.dtype:
        """:attr:`dtype` as a ``torch.dtype``."""
        return DTYPES[self.dtype]

    def check_embodiment(self, embodiment: Embodiment) -> None:
        """Raise :class:`EmbodimentError` unless ``embodiment`` fits this model.

        Its stitched frame must give ``dit.frame_seqlen`` tokens per latent frame, and its state
        and action must fit the model's padded widths.
        """
        _, patch_h, patch_w = self.dit.patch_size
        height, width = embodiment.stitched_size
        factor_h, factor_w = SPATIAL_FACTOR * patch_h, SPATIAL_FACTOR * patch_w
        where = f'embodiment {embodiment.tag!r}'
        if height % factor_h or width % factor_w:
            raise EmbodimentError(
                f'{where}: its {height}x{width} frame is not a multiple of '
                f'{factor_h}x{factor_w} pixels (VAE and patch size)'
            )
        tokens = (height // factor_h) * (width // factor_w)
        if tokens != self.dit.frame_seqlen:
            raise EmbodimentError(
                f'{where}: {len(embodiment.cameras)} view(s) of {embodiment.view_size} stitched '
                f"{embodiment.layout!r} give {tokens} tokens per latent frame, the model's "
                f'frame_seqlen is {self.dit.frame_seqlen}'
            )
        if embodiment.state_dim > self.max_state_dim or embodiment.action_dim > self.max_action_dim:
            raise EmbodimentError(
                f'{where}: state ({embodiment.state_dim}) / action ({embodiment.action_dim}) '
                f'widths exceed the model maximum ({self.max_state_dim} / {self.max_action_dim})'
            )

    @property
    def window_latent_frames(self) -> int:
        """Latent frames of the I2V conditioning ``y`` (9 for DROID)."""
        return 1 + (self.num_frames - 1) // TEMPORAL_FACTOR

    def replace(self, **changes: Any) -> EngineConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    # ---------------------------------------------------------------- presets
    @classmethod
    def droid_14b(cls, **changes: Any) -> EngineConfig:
        """The published DreamZero-DROID model (Wan2.1-I2V-14B DiT, umT5-XXL, ViT-H/14)."""
        return cls(**changes)

    @classmethod
    def small(cls, **changes: Any) -> EngineConfig:
        """A small model of the same structure for the embedded demo.

        32 tokens per latent frame (DROID's three views at 32x64).
        """
        fields = dict(
            dit=DiTConfig(
                dim=256,
                ffn_dim=512,
                num_heads=4,
                num_layers=4,
                freq_dim=64,
                text_dim=64,
                clip_dim=64,
                hidden_size=128,
                frame_seqlen=32,
            ),
            text_encoder=T5Config(
                vocab_size=512, dim=64, dim_attn=64, dim_ffn=128, num_heads=4, num_layers=2
            ),
            image_encoder=CLIPConfig(
                image_size=56, dim=64, num_heads=4, num_layers=3, embed_dim=32
            ),
            vae=VAEConfig(dim=8),
        )
        fields.update(changes)
        return cls(**fields)

    @classmethod
    def tiny(cls, **changes: Any) -> EngineConfig:
        """The smallest model of the same structure, for unit tests.

        8 tokens per latent frame (DROID's three views at 16x32) and context windows of 2 chunks
        (17 frames).
        """
        fields = dict(
            dit=DiTConfig(
                dim=32,
                ffn_dim=64,
                num_heads=2,
                num_layers=2,
                freq_dim=32,
                text_dim=32,
                clip_dim=32,
                hidden_size=32,
                frame_seqlen=8,
                max_chunk_size=2,
            ),
            text_encoder=T5Config.tiny(),
            image_encoder=CLIPConfig(
                image_size=28, dim=32, num_heads=4, num_layers=2, embed_dim=16
            ),
            vae=VAEConfig(dim=4),
            num_frames=17,
        )
        fields.update(changes)
        return cls(**fields)

    @classmethod
    def preset(cls, name: str, **changes: Any) -> EngineConfig:
        """A preset by name: ``droid_14b``, ``small`` or ``tiny``."""
        if name not in PRESETS:
            raise ConfigError(f'unknown preset {name!r}; choose from {sorted(PRESETS)}')
        return getattr(cls, name)(**changes)


#: Names of the :class:`EngineConfig` presets (each a classmethod of that name).
PRESETS = ('droid_14b', 'small', 'tiny')
