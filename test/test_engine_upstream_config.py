# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Strict parsing and writing of upstream's config.json."""

import copy
import json

import pytest

from dreamzero_ros.engine.checkpoint.lora import LoraSettings
from dreamzero_ros.engine.checkpoint.synthetic_droid import droid_embodiment
from dreamzero_ros.engine.checkpoint.upstream_config import (
    config_to_json,
    parse_config,
    read_config,
)
from dreamzero_ros.engine.config import EngineConfig, Sampling
from dreamzero_ros.engine.networks.dit_config import DiTConfig
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.errors import ConfigError, EmbodimentError


def _upstream_config():
    """A config.json shaped like upstream's VLAConfig.save_pretrained output (hydra-resolved)."""
    return {
        'action_dim': 32,
        'action_head_cfg': {
            '_convert_': 'object',
            '_target_': 'groot.vla.model.dreamzero.action_head.wan_flow_matching_action_tf.'
            'WANPolicyHead',
            'config': {
                '_recursive_': False,
                '_target_': 'groot.vla.model.dreamzero.action_head.wan_flow_matching_action_tf.'
                'WANPolicyHeadConfig',
                'action_dim': 32,
                'action_horizon': 24,
                'action_loss_embodiment_ids': [26, 17, 32],
                'add_pos_embed': True,
                'backbone_embedding_dim': 0,
                'backbone_features_projector_cfg': None,
                'decouple_video_action_noise': False,
                'diffusion_model_cfg': {
                    '_convert_': 'object',
                    '_target_': 'groot.vla.model.dreamzero.modules.'
                    'wan_video_dit_action_casual_chunk.CausalWanModel',
                    'diffusion_model_pretrained_path': '/ckpt/Wan2.1-I2V-14B-480P',
                    'dim': 5120,
                    'eps': 1e-06,
                    'ffn_dim': 13824,
                    'frame_seqlen': 880,
                    'freq_dim': 256,
                    'in_dim': 36,
                    'max_chunk_size': 4,
                    'model_type': 'i2v',
                    'num_action_per_block': 24,
                    'num_frame_per_block': 2,
                    'num_heads': 40,
                    'num_layers': 40,
                    'num_state_per_block': 1,
                    'out_dim': 16,
                },
                'expand_batch': None,
                'freeze_decode_layer': False,
                'hidden_size': 64,
                'image_encoder_cfg': {
                    '_convert_': 'object',
                    '_target_': 'groot.vla.model.dreamzero.modules.wan_video_image_encoder.'
                    'WanImageEncoder',
                    'image_encoder_pretrained_path': '/ckpt/clip.pth',
                },
                'init_lora_weights': 'kaiming',
                'input_embedding_dim': 1536,
                'load_pretrained_det_decode_layer_path': None,
                'lora_alpha': 4,
                'lora_rank': 4,
                'lora_target_modules': 'q,k,v,o,ffn.0,ffn.2',
                'max_action_dim': 32,
                'max_state_dim': 64,
                'model_dtype': 'float32',
                'noise_beta_alpha': 1.5,
                'noise_beta_beta': 1.0,
                'noise_s': 0.999,
                'num_frame_per_block': 2,
                'num_frames': 33,
                'num_inference_timesteps': 4,
                'num_timestep_buckets': 1000,
                'repa_coeff': 1.0,
                'repa_layer': 8,
                'text_encoder_cfg': {
                    '_convert_': 'object',
                    '_target_': 'groot.vla.model.dreamzero.modules.wan_video_text_encoder.'
                    'WanTextEncoder',
                    'text_encoder_pretrained_path': '/ckpt/t5.pth',
                },
                'tile_size_height': 34,
                'tile_size_width': 34,
                'tile_stride_height': 18,
                'tile_stride_width': 16,
                'tiled': False,
                'train_architecture': 'full',
                'tune_diffusion_model': True,
                'tune_projector': True,
                'use_gradient_checkpointing': True,
                'use_vlln': True,
                'vae_cfg': {
                    '_convert_': 'object',
                    '_target_': 'groot.vla.model.dreamzero.modules.wan_video_vae.WanVideoVAE',
                    'vae_pretrained_path': '/ckpt/Wan2.1_VAE.pth',
                },
                'video_noise_beta_alpha': 3.0,
                'video_noise_beta_beta': 1.0,
                'vl_self_attention_cfg': {'num_layers': 4},
            },
        },
        'action_horizon': 24,
        'architectures': ['VLA'],
        'backbone_cfg': {
            '_target_': 'groot.vla.model.dreamzero.backbone.identity.IdentityBackbone'
        },
        'hidden_size': 0,
        'model_dtype': 'float32',
        'model_type': 'vla',
        'torch_dtype': 'bfloat16',
        'transformers_version': '4.51.3',
    }


def test_upstream_config_json_gives_the_published_model():
    config = parse_config(_upstream_config())
    assert config == EngineConfig.droid_14b()
    assert config.dit == DiTConfig.full_14b()
    assert config.dit.local_attn_size == 9 and config.window_latent_frames == 9
    config.check_embodiment(droid_embodiment())  # 880 tokens: three 176x320 views


@pytest.mark.parametrize('preset', ['droid_14b', 'small', 'tiny'])
def test_presets_round_trip_through_config_json(preset):
    config = EngineConfig.preset(preset)
    text = json.dumps(config_to_json(config))
    assert parse_config(json.loads(text)) == config
    # The published shapes need no extension block: that file is upstream-shaped.
    assert ('dreamzero_ros' in json.loads(text)) == (preset != 'droid_14b')


def test_options_and_changes_set_what_config_json_does_not_describe():
    options = EngineOptions(device='cuda:1', dtype='float32')
    config = parse_config(_upstream_config(), options, sampling=Sampling(cfg_scale=1.0, seed=7))
    assert config.options is options
    assert (config.sampling.cfg_scale, config.device, config.dtype, config.sampling.seed) == (
        1.0,
        'cuda:1',
        'float32',
        7,
    )
    with pytest.raises(ConfigError, match='invalid engine setting'):
        parse_config(_upstream_config(), no_such_setting=1)


@pytest.mark.parametrize(
    ('path', 'key'),
    [
        ((), 'mystery'),
        (('action_head_cfg',), 'extra'),
        (('action_head_cfg', 'config'), 'new_training_knob'),
        (('action_head_cfg', 'config', 'diffusion_model_cfg'), 'rope_theta'),
        (('action_head_cfg', 'config', 'vae_cfg'), 'tiling'),
    ],
)
def test_unknown_keys_are_named(path, key):
    config = _upstream_config()
    node = config
    for part in path:
        node = node[part]
    node[key] = 1
    with pytest.raises(ConfigError, match=f'unknown config key .*{key}'):
        parse_config(config)


def test_unknown_extension_keys_are_named():
    config = config_to_json(EngineConfig.tiny())
    config['dreamzero_ros']['text_encoder']['rotary'] = True
    with pytest.raises(ConfigError, match='unknown config key text_encoder.rotary'):
        parse_config(config)
    config = config_to_json(EngineConfig.tiny())
    config['dreamzero_ros']['lora'] = {}
    with pytest.raises(ConfigError, match='unknown config key dreamzero_ros.lora'):
        parse_config(config)


@pytest.mark.parametrize(
    ('path', 'value', 'message'),
    [
        (('train_architecture',), 'adapter', 'train_architecture'),
        (('tiled',), True, 'tiled'),
        (('decouple_inference_noise',), True, 'decouple_inference_noise'),
        (('target_video_height',), 160, 'target_video_height'),
        (('diffusion_model_cfg', 'sink_size'), 3, 'sink_size'),
        (('diffusion_model_cfg', 'model_type'), 't2v', 'i2v'),
        (('vae_cfg', 'z_dim'), 48, 'z_dim'),
        (('num_frame_per_block',), 1, 'num_frame_per_block'),
        (('action_dim',), 16, 'action_dim'),
    ],
)
def test_unsupported_settings_are_refused(path, value, message):
    config = _upstream_config()
    node = config['action_head_cfg']['config']
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    with pytest.raises(ConfigError, match=message):
        parse_config(config)


def test_absent_dit_keys_take_upstream_constructor_defaults():
    config = _upstream_config()
    del config['action_head_cfg']['config']['diffusion_model_cfg']['frame_seqlen']
    parsed = parse_config(config)
    # CausalWanModel's default frame_seqlen is 220, which does not fit DROID's 176x320 views.
    assert parsed.dit.frame_seqlen == 220
    with pytest.raises(EmbodimentError, match='give 880 tokens .* frame_seqlen is 220'):
        parsed.check_embodiment(droid_embodiment())


def test_lora_fine_tune_configs_parse_with_their_lora_keys():
    """A LoRA run's config.json, as a published SO-101 fine-tune has it."""
    config = _upstream_config()
    head = config['action_head_cfg']['config']
    head.update(
        train_architecture='lora',
        lora_rank=4,
        lora_alpha=4,
        lora_target_modules='q,k,v,o,ffn.0,ffn.2',
        init_lora_weights='kaiming',
        backbone_features_projector_cfg=None,
    )
    head['text_encoder_cfg']['text_encoder_pretrained_path'] = (
        '/mnt/cluster/checkpoints/Wan2.1-I2V-14B-480P/models_t5_umt5-xxl-enc-bf16.pth'
    )
    config['resume_path'] = 'checkpoints/dreamzero-so101-lora'
    assert parse_config(config) == EngineConfig.droid_14b()
    assert LoraSettings.from_config(config) == LoraSettings(rank=4, alpha=4.0)


def test_structural_errors():
    config = _upstream_config()
    config['action_head_cfg']['config']['diffusion_model_cfg'] = 'nope'
    with pytest.raises(ConfigError, match='diffusion_model_cfg'):
        parse_config(config)
    config = copy.deepcopy(_upstream_config())
    config['action_horizon'] = 16
    with pytest.raises(ConfigError, match='action_horizon'):
        parse_config(config)


def test_read_config_file_errors(tmp_path):
    with pytest.raises(ConfigError, match='missing'):
        read_config(tmp_path)
    (tmp_path / 'config.json').write_text('{"action_dim": ')
    with pytest.raises(ConfigError, match='not valid JSON'):
        read_config(tmp_path)
    (tmp_path / 'config.json').write_text(json.dumps(_upstream_config()))
    assert read_config(tmp_path, EngineOptions(device='cpu')).dit.dim == 5120
