# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``config.json`` in upstream's layout: read into an :class:`~.config.EngineConfig`, or written.

``config.json`` is upstream's ``VLAConfig`` as ``save_pretrained`` writes it.  Parsing is strict:
every key at every level must be known (:data:`IGNORED_HEAD_KEYS` lists the training-only ones
that are accepted and ignored), and settings this engine does not implement (decoupled
inference noise, tiled VAE, Wan 2.2 resizing) are refused.  A LoRA run (``train_architecture``
``lora``) is accepted: its rank and alpha are read by :class:`~.lora.LoraSettings`, and the
adapters are merged as the weights load.  Upstream leaves the encoder
shapes implicit (always umT5-XXL, CLIP ViT-H/14, Wan 2.1 VAE); checkpoints of the smaller presets
state theirs in one extra top-level block, ``"dreamzero_ros"``.
"""

from __future__ import annotations

from collections.abc import Mapping
import dataclasses
from pathlib import Path
from typing import Any

from dreamzero_ros.engine.checkpoint.data_files import read_json_object
from dreamzero_ros.engine.config import EngineConfig
from dreamzero_ros.engine.networks.dit_config import DiTConfig
from dreamzero_ros.engine.networks.image_encoder import CLIPConfig
from dreamzero_ros.engine.networks.text_encoder import T5Config
from dreamzero_ros.engine.networks.vae_network import VAEConfig
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.errors import ConfigError

__all__ = ['IGNORED_HEAD_KEYS', 'config_to_json', 'parse_config', 'read_config']

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
    | {'hidden_size', 'model_dtype', 'dreamzero_ros', 'resume_path'}
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

#: ``action_head_cfg.config`` keys that must hold one of the values this engine implements.
_REQUIRED_HEAD_VALUES: dict[str, tuple[Any, ...]] = {
    'train_architecture': ('full', 'lora'),
    'tiled': (False,),
    'decouple_inference_noise': (False,),
    'target_video_height': (None,),
    'target_video_width': (None,),
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

_EXTENSION_KEYS = frozenset({'text_encoder', 'image_encoder', 'vae', 'clip_dim'})
#: The extension's network shapes -> the :class:`EngineConfig` field of each.
_EXTENSION_SHAPES = {'text_encoder': 'umt5', 'image_encoder': 'clip', 'vae': 'vae'}


def config_to_json(engine: EngineConfig) -> dict[str, Any]:
    """``config.json`` content of ``engine`` in upstream's ``VLAConfig`` layout."""
    dit = engine.dit
    dit_cfg: dict[str, Any] = {'_target_': _TARGETS['dit'], '_convert_': 'object'}
    dit_cfg['diffusion_model_pretrained_path'] = None
    for name in _UPSTREAM_DIT_DEFAULTS:
        value = getattr(dit, name)
        dit_cfg[name] = list(value) if isinstance(value, tuple) else value
    head = {
        '_target_': _TARGETS['head_config'],
        '_recursive_': False,
        'action_dim': engine.max_action_dim,
        'action_horizon': engine.action_horizon,
        'max_state_dim': engine.max_state_dim,
        'max_action_dim': engine.max_action_dim,
        'num_frames': engine.num_frames,
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
        'action_dim': engine.max_action_dim,
        'action_head_cfg': {
            '_target_': _TARGETS['head'],
            '_convert_': 'object',
            'config': head,
        },
        'action_horizon': engine.action_horizon,
        'architectures': ['VLA'],
        'backbone_cfg': {'_target_': _TARGETS['backbone']},
        'hidden_size': 0,
        'model_dtype': 'float32',
        'model_type': 'vla',
        'torch_dtype': engine.dtype,
    }
    extension = _extension(engine)
    if extension:
        config['dreamzero_ros'] = extension
    return config


def _extension(engine: EngineConfig) -> dict[str, Any]:
    """Shapes upstream hard-codes, where they differ from the published model."""
    published = EngineConfig()
    extension: dict[str, Any] = {}
    for key, name in _EXTENSION_SHAPES.items():
        value = getattr(engine, name)
        if value != getattr(published, name):
            extension[key] = _jsonable(dataclasses.asdict(value))
    if engine.dit.clip_dim != published.dit.clip_dim:
        extension['clip_dim'] = engine.dit.clip_dim
    return extension


def parse_config(
    config: Mapping[str, Any], options: EngineOptions | None = None, **changes: Any
) -> EngineConfig:
    """Parse upstream ``config.json`` content strictly, into a configuration with ``options``.

    ``changes`` are other :class:`EngineConfig` fields that ``config.json`` does not describe
    (sampling, session limits ...).
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
    for key, supported in _REQUIRED_HEAD_VALUES.items():
        if key in head and head[key] not in supported:
            raise ConfigError(
                f'action_head_cfg.config.{key} = {head[key]!r} is not supported '
                f'(this engine implements {" or ".join(map(repr, supported))})'
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
    dit_fields = {key: dit_cfg.get(key, default) for key, default in _UPSTREAM_DIT_DEFAULTS.items()}
    dit_fields['patch_size'] = tuple(dit_fields['patch_size'])
    if 'clip_dim' in extension:
        dit_fields['clip_dim'] = extension['clip_dim']
    fields: dict[str, Any] = {
        'dit': _build(DiTConfig, dit_fields, 'diffusion_model_cfg'),
        'umt5': _build(T5Config, extension.get('text_encoder'), 'text_encoder'),
        'clip': _build(CLIPConfig, extension.get('image_encoder'), 'image_encoder'),
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
    fields.update(changes)
    if options is not None:
        fields['options'] = options
    try:
        return EngineConfig(**fields)
    except TypeError as error:
        raise ConfigError(f'invalid engine setting: {error}') from error


def read_config(
    folder: str | Path, options: EngineOptions | None = None, **changes: Any
) -> EngineConfig:
    """Read ``<folder>/config.json`` (see :func:`parse_config`)."""
    path = Path(folder) / 'config.json'
    return parse_config(read_json_object(path, ConfigError, f'missing {path}'), options, **changes)


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
