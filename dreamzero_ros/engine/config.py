# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Engine configuration: the networks' shapes, how a chunk is sampled, and the user's options.

:class:`EngineConfig` composes the shapes of the four networks (:class:`DiTConfig`,
:class:`T5Config` of umT5, :class:`CLIPConfig`, :class:`VAEConfig`), the sampling upstream
hard-codes (:class:`Sampling`: 16 UniPC steps, shift 5, CFG 5, seed 1140, the step cache's
tuning) and the :class:`~.options.EngineOptions` the user chose, held whole (``options``).  The
robot's cameras, state and actions are the checkpoint's :class:`~.embodiment.Embodiment`,
which :meth:`EngineConfig.check_embodiment` fits to the model.

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
from dreamzero_ros.engine.networks.attention import flash_attention_3
from dreamzero_ros.engine.networks.dit_config import DiTConfig
from dreamzero_ros.engine.networks.image_encoder import CLIPConfig
from dreamzero_ros.engine.networks.text_encoder import T5Config
from dreamzero_ros.engine.networks.vae_network import SPATIAL_FACTOR, TEMPORAL_FACTOR, VAEConfig
from dreamzero_ros.engine.option_names import DTYPE_NAMES
from dreamzero_ros.engine.options import AUTO, EngineOptions
from dreamzero_ros.engine.step_cache import StepCacheConfig
from dreamzero_ros.errors import ConfigError, EmbodimentError

__all__ = ['DTYPES', 'NEGATIVE_PROMPT', 'PRESETS', 'EngineConfig', 'Sampling']

#: Accepted ``dtype`` names.
DTYPES: dict[str, torch.dtype] = {name: getattr(torch, name) for name in DTYPE_NAMES}

#: Wan's negative prompt, the text of the unconditional CFG branch.
NEGATIVE_PROMPT = (
    'Vibrant colors, overexposed, static, blurry details, text, subtitles, style, artwork, '
    'painting, image, still, grayscale, dull, worst quality, low quality, JPEG artifacts, ugly, '
    'mutilated, extra fingers, bad hands, bad face, deformed, disfigured, mutated limbs, fused '
    'fingers, stagnant image, cluttered background, three legs, many people in the background, '
    'walking backwards.'
)

#: The presets' options: the reference path in upstream's dtype, on the CPU.  The loaders give
#: the user's instead.
PRESET_OPTIONS = EngineOptions(device='cpu', dtype='bfloat16')


@dataclass(frozen=True)
class Sampling:
    """How each chunk is sampled (upstream's values).

    Attributes:
        num_inference_steps: UniPC steps per chunk.
        shift: sigma shift of the schedule.
        cfg_scale: classifier-free guidance scale of the video velocity (1 disables CFG).
        seed: seed of the initial noise (the same noise every chunk, as upstream).
        num_train_timesteps: timesteps of the training schedule.
        step_cache_tuning: how the ``step_cache`` option's mode skips steps.
        negative_prompt: text of the unconditional branch.

    """

    num_inference_steps: int = 16
    shift: float = 5.0
    cfg_scale: float = 5.0
    seed: int = 1140
    num_train_timesteps: int = 1000
    step_cache_tuning: StepCacheConfig = field(default_factory=StepCacheConfig)
    negative_prompt: str = NEGATIVE_PROMPT

    def __post_init__(self) -> None:
        for ok, message in (
            (self.num_inference_steps >= 1, 'num_inference_steps must be >= 1'),
            (self.shift > 0, 'shift must be > 0'),
            (self.cfg_scale > 0, 'cfg_scale must be > 0'),
        ):
            if not ok:
                raise ConfigError(message)

    @property
    def use_cfg(self) -> bool:
        """Whether the unconditional branch runs (upstream skips it at scale 1)."""
        return self.cfg_scale != 1.0

    @property
    def cfg_rows(self) -> int:
        """CFG rows of a DiT call with both branches batched: 2, or 1 without CFG."""
        return 2 if self.use_cfg else 1


@dataclass(frozen=True)
class EngineConfig:
    """Everything needed to build and run the engine.

    Attributes:
        dit: causal DiT shape.
        umt5: umT5 text encoder shape.
        clip: CLIP vision tower shape.
        vae: Wan VAE shape.
        action_horizon: action rows per chunk (``dit.num_action_per_block``).
        num_frames: video frames of a context window's I2V conditioning (33 -> 9 latents).
        max_state_dim: padded state width (``dit.max_state_dim``).
        max_action_dim: padded action width (``dit.action_dim``).
        sampling: how each chunk is sampled.
        options: the user's engine options, whole; ``device`` and ``dtype`` resolved
            (``auto`` is resolved here).  FP8 linears need ``bfloat16``.
        compile_backend: the ``torch.compile`` backend of the ``compile`` option.
        max_sessions: sessions kept at once (least recently used ones are dropped).
        max_cached_prompts: prompt encodings kept at once.

    """

    dit: DiTConfig = field(default_factory=DiTConfig.full_14b)
    umt5: T5Config = field(default_factory=T5Config.umt5_xxl)
    clip: CLIPConfig = field(default_factory=CLIPConfig.vit_h_14)
    vae: VAEConfig = field(default_factory=VAEConfig.wan21)
    action_horizon: int = 24
    num_frames: int = 33
    max_state_dim: int = 64
    max_action_dim: int = 32
    sampling: Sampling = field(default_factory=Sampling)
    options: EngineOptions = PRESET_OPTIONS
    compile_backend: str = 'inductor'
    max_sessions: int = 4
    max_cached_prompts: int = 16

    def __post_init__(self) -> None:
        if not isinstance(self.options, EngineOptions):
            raise ConfigError('options must be EngineOptions')
        if AUTO in (self.options.device, self.options.dtype):
            object.__setattr__(self, 'options', self.options.resolved())
        options = self.options
        if options.fp8_linear != 'off' and options.dtype != 'bfloat16':
            raise ConfigError(f'fp8_linear needs dtype bfloat16, got {options.dtype!r}')
        if options.attention_backend == 'fa3':
            try:  # refused here, not at the first chunk, where it is missing
                flash_attention_3()
            except RuntimeError as error:
                raise ConfigError(str(error)) from error
        self.sampling.step_cache_tuning.check(options.step_cache, self.sampling.num_inference_steps)
        dit = self.dit
        checks = [
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
                dit.text_dim == self.umt5.dim,
                f'dit.text_dim {dit.text_dim} != umt5.dim {self.umt5.dim}',
            ),
            (
                dit.text_len == self.umt5.text_len,
                f'dit.text_len {dit.text_len} != umt5.text_len',
            ),
            (
                dit.clip_dim == self.clip.dim,
                f'dit.clip_dim {dit.clip_dim} != clip.dim {self.clip.dim}',
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
            (self.max_sessions >= 1, 'max_sessions must be >= 1'),
            (self.max_cached_prompts >= 1, 'max_cached_prompts must be >= 1'),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)

    @property
    def device(self) -> str:
        """The torch device (``options.device``)."""
        return self.options.device

    @property
    def dtype(self) -> str:
        """The weight and activation dtype's name (``options.dtype``)."""
        return self.options.dtype

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

    def on(self, device: str) -> EngineConfig:
        """The same configuration on another device (``meta``: shapes only)."""
        return self.replace(options=dataclasses.replace(self.options, device=device))

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
            umt5=T5Config(
                vocab_size=512, dim=64, dim_attn=64, dim_ffn=128, num_heads=4, num_layers=2
            ),
            clip=CLIPConfig(image_size=56, dim=64, num_heads=4, num_layers=3, embed_dim=32),
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
            umt5=T5Config.tiny(),
            clip=CLIPConfig(image_size=28, dim=32, num_heads=4, num_layers=2, embed_dim=16),
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
