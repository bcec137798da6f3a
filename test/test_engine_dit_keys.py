# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The DiT's state_dict reproduces upstream CausalWanModel's key names and shapes exactly.

The expected names/shapes below were derived by reading upstream
``groot/vla/model/dreamzero/modules/wan_video_dit_action_casual_chunk.py`` (CausalWanModel,
CausalWanAttentionBlock, CausalHead, CategorySpecificLinear/MLP, MultiEmbodimentActionEncoder)
and ``wan2_1_submodule.py`` (WanRMSNorm, WanLayerNorm, WanI2VCrossAttention, MLPProj), with the
DROID 14B settings (dim 5120, 40 layers, 40 heads, ffn 13824, in_dim 36, i2v, cross_attn_norm,
max_num_embodiments forced to 1, max_state_dim 64, action_dim 32, hidden_size 1024).
They are written out literally here, not computed from our module.
"""

import dataclasses

from network_support import repeated_keys
import pytest
import torch

from dreamzero_ros.engine.networks.dit import CausalWanDiT
from dreamzero_ros.engine.networks.dit_config import DiTConfig

# Keys outside the blocks: name -> shape for the 14B model.
TOP_LEVEL_14B = {
    'state_encoder.layer1.W': (1, 64, 1024),
    'state_encoder.layer1.b': (1, 1024),
    'state_encoder.layer2.W': (1, 1024, 5120),
    'state_encoder.layer2.b': (1, 5120),
    'action_encoder.W1.W': (1, 32, 5120),
    'action_encoder.W1.b': (1, 5120),
    'action_encoder.W2.W': (1, 10240, 5120),
    'action_encoder.W2.b': (1, 5120),
    'action_encoder.W3.W': (1, 5120, 5120),
    'action_encoder.W3.b': (1, 5120),
    'action_decoder.layer1.W': (1, 5120, 1024),
    'action_decoder.layer1.b': (1, 1024),
    'action_decoder.layer2.W': (1, 1024, 32),
    'action_decoder.layer2.b': (1, 32),
    'patch_embedding.weight': (5120, 36, 1, 2, 2),
    'patch_embedding.bias': (5120,),
    'text_embedding.0.weight': (5120, 4096),
    'text_embedding.0.bias': (5120,),
    'text_embedding.2.weight': (5120, 5120),
    'text_embedding.2.bias': (5120,),
    'time_embedding.0.weight': (5120, 256),
    'time_embedding.0.bias': (5120,),
    'time_embedding.2.weight': (5120, 5120),
    'time_embedding.2.bias': (5120,),
    'time_projection.1.weight': (30720, 5120),
    'time_projection.1.bias': (30720,),
    'head.head.weight': (64, 5120),
    'head.head.bias': (64,),
    'head.modulation': (1, 2, 5120),
    'img_emb.proj.0.weight': (1280,),
    'img_emb.proj.0.bias': (1280,),
    'img_emb.proj.1.weight': (1280, 1280),
    'img_emb.proj.1.bias': (1280,),
    'img_emb.proj.3.weight': (5120, 1280),
    'img_emb.proj.3.bias': (5120,),
    'img_emb.proj.4.weight': (5120,),
    'img_emb.proj.4.bias': (5120,),
}

# Keys of every block ``blocks.{i}.`` (norm1 and norm2 have no affine parameters upstream).
PER_BLOCK_14B = {
    'modulation': (1, 6, 5120),
    'self_attn.q.weight': (5120, 5120),
    'self_attn.q.bias': (5120,),
    'self_attn.k.weight': (5120, 5120),
    'self_attn.k.bias': (5120,),
    'self_attn.v.weight': (5120, 5120),
    'self_attn.v.bias': (5120,),
    'self_attn.o.weight': (5120, 5120),
    'self_attn.o.bias': (5120,),
    'self_attn.norm_q.weight': (5120,),
    'self_attn.norm_k.weight': (5120,),
    'norm3.weight': (5120,),
    'norm3.bias': (5120,),
    'cross_attn.q.weight': (5120, 5120),
    'cross_attn.q.bias': (5120,),
    'cross_attn.k.weight': (5120, 5120),
    'cross_attn.k.bias': (5120,),
    'cross_attn.v.weight': (5120, 5120),
    'cross_attn.v.bias': (5120,),
    'cross_attn.o.weight': (5120, 5120),
    'cross_attn.o.bias': (5120,),
    'cross_attn.k_img.weight': (5120, 5120),
    'cross_attn.k_img.bias': (5120,),
    'cross_attn.v_img.weight': (5120, 5120),
    'cross_attn.v_img.bias': (5120,),
    'cross_attn.norm_q.weight': (5120,),
    'cross_attn.norm_k.weight': (5120,),
    'cross_attn.norm_k_img.weight': (5120,),
    'ffn.0.weight': (13824, 5120),
    'ffn.0.bias': (13824,),
    'ffn.2.weight': (5120, 13824),
    'ffn.2.bias': (5120,),
}


def expected_14b() -> dict[str, tuple[int, ...]]:
    return {**TOP_LEVEL_14B, **repeated_keys('blocks', 40, PER_BLOCK_14B)}


def meta_state(config: DiTConfig) -> dict[str, tuple[int, ...]]:
    with torch.device('meta'):
        model = CausalWanDiT(config)
    return {key: tuple(t.shape) for key, t in model.state_dict().items()}


def test_14b_keys_and_shapes_match_upstream():
    actual = meta_state(DiTConfig.full_14b())
    expected = expected_14b()
    assert sorted(set(expected) - set(actual)) == []
    assert sorted(set(actual) - set(expected)) == []
    mismatched = {k: (actual[k], expected[k]) for k in expected if actual[k] != expected[k]}
    assert mismatched == {}
    # Wan2.1-I2V-14B (image K/V included) plus the action/state heads: 16.48e9 parameters, i.e.
    # ~33 GB in bf16, which with umT5-XXL (~11 GB), CLIP and the VAE makes the ~46 GB checkpoint.
    numel = sum(torch.Size(s).numel() for s in expected.values())
    assert numel == 16_484_292_448


def test_tiny_config_has_the_same_key_set():
    tiny = meta_state(DiTConfig.tiny())
    full = expected_14b()
    tiny_blocks = {k for k in tiny if k.startswith('blocks.')}
    assert {k for k in tiny if not k.startswith('blocks.')} == set(TOP_LEVEL_14B)
    layers = DiTConfig.tiny().num_layers
    assert tiny_blocks == {f'blocks.{i}.{n}' for i in range(layers) for n in PER_BLOCK_14B}
    assert {k for k in full if not k.startswith('blocks.')} == set(TOP_LEVEL_14B)


def test_no_buffers_in_state_dict():
    # Upstream keeps rotary tables as plain attributes: nothing but parameters is saved.
    with torch.device('meta'):
        model = CausalWanDiT(DiTConfig.tiny())
    assert set(model.state_dict()) == {name for name, _ in model.named_parameters()}


def test_full_14b_geometry():
    config = DiTConfig.full_14b()
    assert config.head_dim == 128
    assert config.local_attn_size == 9
    assert config.max_attention_tokens == 7920
    assert config.register_tokens == 25


def test_config_rejects_inconsistent_fields():
    with pytest.raises(ValueError, match='num_heads'):
        DiTConfig(dim=100, num_heads=3)
    with pytest.raises(ValueError, match='i2v'):
        DiTConfig(model_type='t2v')
    with pytest.raises(ValueError, match='multiple'):
        dataclasses.replace(DiTConfig.tiny(), num_action_per_block=5, num_state_per_block=2)
