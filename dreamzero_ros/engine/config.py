# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Engine configuration: model shapes, view geometry and inference settings, and ``config.json``.

:class:`EngineConfig` composes the shapes of the four networks (:class:`DiTConfig`,
:class:`T5Config`, :class:`CLIPConfig`, :class:`VAEConfig`), the DROID view geometry and the
sampling settings upstream hard-codes (16 UniPC steps, shift 5, CFG 5, seed 1140, DiT on 8 steps).

Presets:

* :meth:`EngineConfig.droid_14b` -- the published GEAR-Dreams/DreamZero-DROID model;
* :meth:`EngineConfig.small` -- a few-million-parameter model of the same structure for the
  embedded demo (seconds per chunk on a laptop CPU);
* :meth:`EngineConfig.tiny` -- the smallest model of the same structure, for tests.

``config.json`` is upstream's ``VLAConfig`` as ``save_pretrained`` writes it.  Parsing is strict:
every key at every level must be known (:data:`IGNORED_HEAD_KEYS` lists the training-only ones
that are accepted and ignored), and settings this engine does not implement (LoRA weights,
decoupled inference noise, tiled VAE, Wan 2.2 resizing) are refused.  Upstream leaves the encoder
shapes implicit (always umT5-XXL, CLIP ViT-H/14, Wan 2.1 VAE); checkpoints of the smaller presets
state theirs in one extra top-level block, ``"dreamzero_ros"``.
"""

from __future__ import annotations

from collections.abc import Mapping
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .dit import DiTConfig
from .droid_inputs import NEGATIVE_PROMPT, ViewGeometry
from .fast_blocks import AccelerationConfig
from .image_encoder import CLIPConfig
from .json_files import read_json
from .normalization import EMBODIMENT_LAYOUTS
from .step_cache import StepCacheConfig
from .text_encoder import T5Config
from .vae import SPATIAL_FACTOR, TEMPORAL_FACTOR, VAEConfig

__all__ = ['DTYPES', 'ConfigError', 'EngineConfig', 'PRESETS']

#: Accepted ``dtype`` names.
DTYPES: dict[str, torch.dtype] = {
    'bfloat16': torch.bfloat16,
    'float16': torch.float16,
    'float32': torch.float32,
}

_TARGETS = {
    'head': 'groot.vla.model.dreamzero.action_head.wan_flow_matching_action_tf.WANPolicyHead',
    'head_config': (
        'groot.vla.model.dreamzero.action_head.wan_flow_matching_action_tf.WANPolicyHeadConfig'
    ),
    'dit': 'groot.vla.model.dreamzero.modules.wan_video_dit_action_casual_chunk.CausalWanModel',
    'text_encoder': 'groot.vla.model.dreamzero.modules.wan_video_text_encoder.WanTextEncoder',
    'image_encoder': 'groot.vla.model.dreamzero.modules.wan_video_image_encoder.WanImageEncoder',
    'vae': 'groot.vla.model.dreamzero.modules.wan_video_vae.WanVideoVAE',
    'backbone': 'groot.vla.model.dreamzero.backbone.identity.IdentityBackbone',
}

#: Keys ``transformers.PretrainedConfig`` may serialise at the top level (all ignored).
_PRETRAINED_CONFIG_KEYS = frozenset(
    '_name_or_path _commit_hash _attn_implementation_autoset attn_implementation'
    ' add_cross_attention architectures bad_words_ids begin_suppress_tokens bos_token_id'
    ' chunk_size_feed_forward'
    ' cross_attention_hidden_size decoder_start_token_id diversity_penalty do_sample dtype'
    ' early_stopping encoder_no_repeat_ngram_size eos_token_id exponential_decay_length_penalty'
    ' finetuning_task forced_bos_token_id forced_eos_token_id id2label is_decoder'
    ' is_encoder_decoder label2id length_penalty max_length min_length model_type'
    ' no_repeat_ngram_size num_beam_groups num_beams num_labels num_return_sequences'
    ' output_attentions output_hidden_states output_scores pad_token_id prefix problem_type'
    ' pruned_heads remove_invalid_values repetition_penalty return_dict return_dict_in_generate'
    ' sep_token_id suppress_tokens task_specific_params temperature tf_legacy_loss'
    ' tie_encoder_decoder tie_word_embeddings tokenizer_class top_k top_p torch_dtype torchscript'
    ' transformers_version typical_p use_bfloat16'.split()
)

#: Top-level ``VLAConfig`` keys: parsed (``action_*``) or ignored (the rest).
_VLA_KEYS = frozenset(
    {'action_dim', 'action_head_cfg', 'action_horizon', 'backbone_cfg', 'compute_dtype'}
    | {'hidden_size', 'model_dtype', 'dreamzero_ros'}
)

#: ``action_head_cfg.config`` keys that only matter for training (accepted and ignored).
IGNORED_HEAD_KEYS = frozenset(
    '_target_ _recursive_ action_loss_embodiment_ids add_pos_embed backbone_embedding_dim'
    ' backbone_features_projector_cfg decouple_video_action_noise defer_lora_injection'
    ' detection_coeff expand_batch freeze_decode_layer hidden_size high_noise_beta_alpha'
    ' init_lora_weights input_embedding_dim load_pretrained_det_decode_layer_path lora_alpha'
    ' lora_rank lora_target_modules max_num_embodiments max_seq_len model_dtype noise_beta_alpha'
    ' noise_beta_beta noise_s num_inference_timesteps num_timestep_buckets qformer_cfg repa_coeff'
    ' repa_layer skip_component_loading tile_size_height tile_size_width tile_stride_height'
    ' tile_stride_width tune_diffusion_model tune_projector use_gradient_checkpointing'
    ' use_high_noise_emphasis use_vlln video_inference_final_noise video_noise_beta_alpha'
    ' video_noise_beta_beta vl_self_attention_cfg'.split()
)

#: ``action_head_cfg.config`` keys that must hold the value this engine implements.
_REQUIRED_HEAD_VALUES: dict[str, Any] = {
    'train_architecture': 'full',
    'tiled': False,
    'decouple_inference_noise': False,
    'target_video_height': None,
    'target_video_width': None,
}

_PARSED_HEAD_KEYS = frozenset(
    {'action_dim', 'action_horizon', 'max_state_dim', 'max_action_dim', 'num_frames'}
    | {'num_frame_per_block'}
    | {'diffusion_model_cfg', 'text_encoder_cfg', 'image_encoder_cfg', 'vae_cfg'}
)

#: ``CausalWanModel.__init__`` defaults: what upstream builds when a key is absent.
_UPSTREAM_DIT_DEFAULTS: dict[str, Any] = {
    'model_type': 't2v',
    'patch_size': (1, 2, 2),
    'frame_seqlen': 220,
    'text_len': 512,
    'in_dim': 16,
    'dim': 2048,
    'ffn_dim': 8192,
    'freq_dim': 256,
    'text_dim': 4096,
    'out_dim': 16,
    'num_heads': 16,
    'num_layers': 32,
    'max_chunk_size': -1,
    'qk_norm': True,
    'cross_attn_norm': True,
    'eps': 1e-6,
    'num_frame_per_block': 1,
    'action_dim': 32,
    'max_state_dim': 64,
    'hidden_size': 1024,
    'num_action_per_block': 32,
    'num_state_per_block': 1,
}
#: ``CausalWanModel`` arguments that do not change inference here (accepted and ignored), and
#: those that must keep the value this engine implements.
_IGNORED_DIT_KEYS = frozenset(
    {'_target_', '_convert_', 'diffusion_model_pretrained_path', 'num_registers'}
    | {'max_num_embodiments'}
)
_REQUIRED_DIT_VALUES: dict[str, Any] = {'sink_size': 0, 'concat_first_frame_latent': True}

_ENCODER_CFG_KEYS = {
    'text_encoder_cfg': frozenset({'_target_', '_convert_', 'text_encoder_pretrained_path'}),
    'image_encoder_cfg': frozenset({'_target_', '_convert_', 'image_encoder_pretrained_path'}),
    'vae_cfg': frozenset({'_target_', '_convert_', 'vae_pretrained_path', 'z_dim'}),
}

_EXTENSION_KEYS = frozenset({'text_encoder', 'image_encoder', 'vae', 'clip_dim', 'view_size'})


class ConfigError(ValueError):
    """``config.json`` or an :class:`EngineConfig` is invalid; the message names the key."""


@dataclass(frozen=True)
class EngineConfig:
    """Everything needed to build and run the engine.

    Attributes:
        dit: causal DiT shape.
        text_encoder: umT5 encoder shape.
        image_encoder: CLIP vision tower shape.
        vae: Wan VAE shape.
        view: per-view crop/resize geometry (the stitched frame is twice its size).
        embodiment: embodiment tag whose statistics and layout are used.
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
        control_hz: control rate the actions are meant for (one row per step).
        compile: ``torch.compile`` the DiT blocks: ``False`` (reference), ``True`` (inductor) or
            a backend name; on CUDA it also lets cuDNN pick its fastest convolutions and
            compiles the VAE encoder's norms (``vae_compile``).
        fp8_linear: DiT block linears in FP8 e4m3: ``off`` (reference), ``rowwise`` or
            ``tensorwise`` scaling (``True`` means ``rowwise``); needs ``bfloat16``.
        attention_backend: preferred attention kernel: ``auto`` (torch's choice, reference),
            ``cudnn``, ``flash``, ``efficient``, ``math``, or ``fa3``: FlashAttention-3 (Hopper;
            the ``flash_attn_3`` package, refused when it is not installed) for the unmasked
            bf16/fp16 CUDA calls, cuDNN for the rest.
        skip_final_uncond: when the predicted video is not requested, the last DiT call of a
            chunk runs the conditional CFG branch only (same actions; default on).
        uniform_modulation: the fast block runner broadcasts one AdaLN vector per token kind
            when a call's timesteps are uniform (same values; default on).
        fused_kv_write: the fast block runner writes keys/values into the K/V cache from
            inside its compiled stage (same values; default on).
        gelu_epilogue: on CUDA, the fast block runner's bf16/fp16 FFN input projection applies
            its tanh GELU in the matrix product's epilogue (cuBLASLt; same function, default on).
        triton_qk_rope: on CUDA with Triton, the fast block runner's QK RMSNorm, rotary
            embedding and K/V cache write run as one Triton kernel (same function; default on;
            needs ``fused_kv_write``).
        vae_frames_per_pass: frames the VAE encoder takes per pass: a multiple of 4 (upstream
            and default: 4), or 0 for all frames of a call in one pass (on the 14B preset on an
            H200: 3-4 ms faster per chunk, 5 GiB more peak memory, 10 GiB uncompiled).
        vae_channels_last: VAE encoder activations in ``channels_last_3d`` memory format; None:
            on with ``compile`` on CUDA, off otherwise.
        vae_compile: compile the VAE encoder's RMS norm, SiLU and causal time padding into one
            kernel per layer: ``True`` (with the ``compile`` backend, else inductor), a backend
            name, ``False``; None: on with ``compile`` and ``channels_last_3d``.
        inputs_on_device: crop, resize and stitch the camera views on the engine's device (the
            host only uploads the uint8 frames); None: on when the device is a GPU.  The same
            operations either way; a GPU may round a resized pixel to the neighbouring uint8 value.

    """

    dit: DiTConfig = field(default_factory=DiTConfig.full_14b)
    text_encoder: T5Config = field(default_factory=T5Config.umt5_xxl)
    image_encoder: CLIPConfig = field(default_factory=CLIPConfig.vit_h_14)
    vae: VAEConfig = field(default_factory=VAEConfig.wan21)
    view: ViewGeometry = field(default_factory=ViewGeometry)
    embodiment: str = 'oxe_droid'
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
    control_hz: float = 15.0
    compile: bool | str = False
    fp8_linear: str | bool = 'off'
    attention_backend: str = 'auto'
    skip_final_uncond: bool = True
    uniform_modulation: bool = True
    fused_kv_write: bool = True
    gelu_epilogue: bool = True
    triton_qk_rope: bool = True
    vae_frames_per_pass: int = TEMPORAL_FACTOR
    vae_channels_last: bool | None = None
    vae_compile: bool | str | None = None
    inputs_on_device: bool | None = None

    def __post_init__(self) -> None:
        if isinstance(self.step_cache, str):
            try:
                object.__setattr__(self, 'step_cache', StepCacheConfig(mode=self.step_cache))
            except ValueError as error:
                raise ConfigError(str(error)) from error
        try:
            acceleration = self.acceleration
        except ValueError as error:
            raise ConfigError(str(error)) from error
        object.__setattr__(self, 'fp8_linear', acceleration.fp8_linear)
        if acceleration.fp8_linear != 'off' and self.dtype != 'bfloat16':
            raise ConfigError(f'fp8_linear needs dtype bfloat16, got {self.dtype!r}')
        dit = self.dit
        checks = [
            (self.embodiment in EMBODIMENT_LAYOUTS, f'unknown embodiment {self.embodiment!r}'),
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
                all(s % SPATIAL_FACTOR == 0 for s in self.view.view_size),
                f'view_size {self.view.view_size} must be multiples of {SPATIAL_FACTOR}',
            ),
            (
                self.latent_grid[0] * self.latent_grid[1]
                == dit.frame_seqlen * dit.patch_size[1] * dit.patch_size[2],
                f'view_size {self.view.view_size} gives latent grid {self.latent_grid}, which does '
                f'not match dit.frame_seqlen {dit.frame_seqlen}',
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
            (self.control_hz > 0, 'control_hz must be > 0'),
            (
                self.vae_frames_per_pass >= 0 and self.vae_frames_per_pass % TEMPORAL_FACTOR == 0,
                f'vae_frames_per_pass must be 0 or a positive multiple of {TEMPORAL_FACTOR}, '
                f'got {self.vae_frames_per_pass}',
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        if self.step_cache.mode == 'static' and self.num_inference_steps != 16:
            raise ConfigError('the static step cache is defined for 16 inference steps')

    @property
    def acceleration(self) -> AccelerationConfig:
        """The DiT speed switches (``compile``, ``fp8_linear``, ``attention_backend``, ...)."""
        return AccelerationConfig(
            self.compile,
            self.fp8_linear,
            self.attention_backend,
            self.uniform_modulation,
            self.fused_kv_write,
            self.gelu_epilogue,
            self.triton_qk_rope,
        )

    @property
    def vae_encode_options(self) -> tuple[int, bool, str | None]:
        """``(frames_per_pass, channels_last, compile_backend)`` of the VAE encoder, resolved.

        ``frames_per_pass`` 0 means all frames of a call in one pass; ``compile_backend`` is
        None when the encoder's norm/SiLU/padding stay uncompiled.
        """
        backend = self.acceleration.compile_backend
        channels_last = self.vae_channels_last
        if channels_last is None:
            channels_last = backend is not None and torch.device(self.device).type == 'cuda'
        fused = self.vae_compile
        if fused is None:
            fused = backend is not None and channels_last
        if isinstance(fused, str):
            return self.vae_frames_per_pass, channels_last, fused
        return self.vae_frames_per_pass, channels_last, (backend or 'inductor') if fused else None

    @property
    def prepares_inputs_on_device(self) -> bool:
        """Whether the views are cropped, resized and stitched on :attr:`device`."""
        if self.inputs_on_device is None:
            return torch.device(self.device).type == 'cuda'
        return self.inputs_on_device

    @property
    def torch_dtype(self) -> torch.dtype:
        """:attr:`dtype` as a ``torch.dtype``."""
        return DTYPES[self.dtype]

    @property
    def latent_grid(self) -> tuple[int, int]:
        """Latent height and width of the stitched frame."""
        height, width = self.view.stitched_size
        return height // SPATIAL_FACTOR, width // SPATIAL_FACTOR

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
        """A small model of the same structure for the embedded demo (32x64 views)."""
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
            view=ViewGeometry(view_size=(32, 64)),
        )
        fields.update(changes)
        return cls(**fields)

    @classmethod
    def tiny(cls, **changes: Any) -> EngineConfig:
        """The smallest model of the same structure, for unit tests.

        16x32 views (8 tokens per latent frame) and context windows of 2 chunks (17 frames).
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
            view=ViewGeometry(view_size=(16, 32)),
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

    # ------------------------------------------------------------ config.json
    def to_json_dict(self) -> dict[str, Any]:
        """``config.json`` content in upstream's ``VLAConfig`` layout."""
        dit = self.dit
        dit_cfg: dict[str, Any] = {'_target_': _TARGETS['dit'], '_convert_': 'object'}
        dit_cfg['diffusion_model_pretrained_path'] = None
        for name in _UPSTREAM_DIT_DEFAULTS:
            value = getattr(dit, name)
            dit_cfg[name] = list(value) if isinstance(value, tuple) else value
        head = {
            '_target_': _TARGETS['head_config'],
            '_recursive_': False,
            'action_dim': self.max_action_dim,
            'action_horizon': self.action_horizon,
            'max_state_dim': self.max_state_dim,
            'max_action_dim': self.max_action_dim,
            'num_frames': self.num_frames,
            'num_frame_per_block': dit.num_frame_per_block,
            'train_architecture': 'full',
            'tiled': False,
            'decouple_inference_noise': False,
            'video_inference_final_noise': 0.8,
            'target_video_height': None,
            'target_video_width': None,
            'model_dtype': 'float32',
            'hidden_size': 64,
            'input_embedding_dim': 1536,
            'backbone_embedding_dim': 0,
            'num_inference_timesteps': 4,
            'skip_component_loading': True,
            'defer_lora_injection': False,
            'diffusion_model_cfg': dit_cfg,
        }
        for key, path_key in (
            ('text_encoder_cfg', 'text_encoder_pretrained_path'),
            ('image_encoder_cfg', 'image_encoder_pretrained_path'),
            ('vae_cfg', 'vae_pretrained_path'),
        ):
            target = _TARGETS[key.removesuffix('_cfg')]
            head[key] = {'_target_': target, '_convert_': 'object', path_key: None}
        config: dict[str, Any] = {
            'action_dim': self.max_action_dim,
            'action_head_cfg': {
                '_target_': _TARGETS['head'],
                '_convert_': 'object',
                'config': head,
            },
            'action_horizon': self.action_horizon,
            'architectures': ['VLA'],
            'backbone_cfg': {'_target_': _TARGETS['backbone']},
            'hidden_size': 0,
            'model_dtype': 'float32',
            'model_type': 'vla',
            'torch_dtype': self.dtype,
        }
        extension = self._extension()
        if extension:
            config['dreamzero_ros'] = extension
        return config

    def _extension(self) -> dict[str, Any]:
        """Shapes upstream hard-codes, where they differ from the published model."""
        published = EngineConfig()
        extension: dict[str, Any] = {}
        for name in ('text_encoder', 'image_encoder', 'vae'):
            value = getattr(self, name)
            if value != getattr(published, name):
                extension[name] = _jsonable(dataclasses.asdict(value))
        if self.dit.clip_dim != published.dit.clip_dim:
            extension['clip_dim'] = self.dit.clip_dim
        if self.view.view_size != published.view.view_size:
            extension['view_size'] = list(self.view.view_size)
        return extension

    @classmethod
    def from_json_dict(cls, config: Mapping[str, Any], **settings: Any) -> EngineConfig:
        """Parse upstream ``config.json`` content strictly; ``settings`` override the rest.

        ``settings`` are :class:`EngineConfig` fields that ``config.json`` does not describe
        (sampling, device, dtype, session limits, view source size ...).
        """
        _check_keys(config, _VLA_KEYS | _PRETRAINED_CONFIG_KEYS, 'config.json')
        head_cfg = _mapping(config, 'action_head_cfg', 'config.json')
        _check_keys(head_cfg, {'_target_', '_convert_', '_recursive_', 'config'}, 'action_head_cfg')
        head = _mapping(head_cfg, 'config', 'action_head_cfg')
        _check_keys(
            head,
            IGNORED_HEAD_KEYS | _PARSED_HEAD_KEYS | set(_REQUIRED_HEAD_VALUES),
            'action_head_cfg.config',
        )
        for key, required in _REQUIRED_HEAD_VALUES.items():
            if key in head and head[key] != required:
                raise ConfigError(
                    f'action_head_cfg.config.{key} = {head[key]!r} is not supported '
                    f'(this engine implements {required!r})'
                )
        for key, allowed in _ENCODER_CFG_KEYS.items():
            sub = head.get(key, {})
            _check_keys(sub, allowed, f'action_head_cfg.config.{key}')
        if head.get('vae_cfg', {}).get('z_dim', 16) != 16:
            raise ConfigError('action_head_cfg.config.vae_cfg.z_dim: only the Wan 2.1 VAE (16)')

        extension = config.get('dreamzero_ros', {})
        if not isinstance(extension, Mapping):
            raise ConfigError('config.json: "dreamzero_ros" must be an object')
        _check_keys(extension, _EXTENSION_KEYS, 'dreamzero_ros')

        dit_cfg = _mapping(head, 'diffusion_model_cfg', 'action_head_cfg.config')
        _check_keys(
            dit_cfg,
            set(_UPSTREAM_DIT_DEFAULTS) | _IGNORED_DIT_KEYS | set(_REQUIRED_DIT_VALUES),
            'diffusion_model_cfg',
        )
        for key, required in _REQUIRED_DIT_VALUES.items():
            if key in dit_cfg and dit_cfg[key] != required:
                raise ConfigError(f'diffusion_model_cfg.{key} = {dit_cfg[key]!r} is not supported')
        dit_fields = {
            key: dit_cfg.get(key, default) for key, default in _UPSTREAM_DIT_DEFAULTS.items()
        }
        dit_fields['patch_size'] = tuple(dit_fields['patch_size'])
        if 'clip_dim' in extension:
            dit_fields['clip_dim'] = extension['clip_dim']
        fields: dict[str, Any] = {
            'dit': _build(DiTConfig, dit_fields, 'diffusion_model_cfg'),
            'text_encoder': _build(T5Config, extension.get('text_encoder'), 'text_encoder'),
            'image_encoder': _build(CLIPConfig, extension.get('image_encoder'), 'image_encoder'),
            'vae': _build(VAEConfig, extension.get('vae'), 'vae'),
        }
        if (
            head.get('num_frame_per_block', dit_fields['num_frame_per_block'])
            != dit_fields['num_frame_per_block']
        ):
            raise ConfigError('action_head_cfg.config.num_frame_per_block disagrees with the DiT')
        for key in ('action_horizon', 'num_frames', 'max_state_dim', 'max_action_dim'):
            if key in head:
                fields[key] = head[key]
        for key in ('action_horizon', 'action_dim'):
            if key in config and key in head and config[key] != head[key]:
                raise ConfigError(f'config.json {key} {config[key]} != action_head_cfg {head[key]}')
        if 'action_dim' in head and head['action_dim'] != fields.get('max_action_dim', 32):
            raise ConfigError('action_head_cfg.config.action_dim differs from max_action_dim')
        view = settings.pop('view', ViewGeometry())
        if 'view_size' in extension:
            view = dataclasses.replace(view, view_size=tuple(extension['view_size']))
        fields['view'] = view
        fields.update(settings)
        try:
            return cls(**fields)
        except TypeError as error:
            raise ConfigError(f'invalid engine setting: {error}') from error

    @classmethod
    def from_pretrained(cls, folder: str | Path, **settings: Any) -> EngineConfig:
        """Read ``<folder>/config.json`` (see :meth:`from_json_dict`)."""
        path = Path(folder) / 'config.json'
        if not path.is_file():
            raise ConfigError(f'missing {path}')
        config = read_json(path, ConfigError)
        if not isinstance(config, dict):
            raise ConfigError(f'{path}: expected a JSON object')
        return cls.from_json_dict(config, **settings)


#: Names of the :class:`EngineConfig` presets (each a classmethod of that name).
PRESETS = ('droid_14b', 'small', 'tiny')


def _jsonable(value: Any) -> Any:
    """Tuples to lists, recursively (``dataclasses.asdict`` keeps tuples)."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _check_keys(mapping: Mapping[str, Any], allowed: set | frozenset, where: str) -> None:
    """Raise :class:`ConfigError` naming the first key of ``mapping`` not in ``allowed``."""
    if not isinstance(mapping, Mapping):
        raise ConfigError(f'{where} must be an object, got {type(mapping).__name__}')
    unknown = sorted(set(mapping) - set(allowed))
    if unknown:
        raise ConfigError(f'unknown config key {where}.{unknown[0]} (all unknown: {unknown})')


def _mapping(parent: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = parent.get(key)
    if not isinstance(value, Mapping):
        raise ConfigError(f'{where}.{key} is missing or not an object')
    return value


def _build(cls: type, values: Mapping[str, Any] | None, where: str) -> Any:
    """Instantiate a shape dataclass from JSON values (lists become tuples), strictly."""
    if values is None:
        return cls()
    if not isinstance(values, Mapping):
        raise ConfigError(f'{where} must be an object')
    names = {f.name for f in dataclasses.fields(cls)}
    _check_keys(values, names, where)
    converted = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    try:
        return cls(**converted)
    except (TypeError, ValueError) as error:
        raise ConfigError(f'{where}: {error}') from error
