# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The CLIP image encoder: upstream keys and shapes, preprocessing, penultimate-block output."""

from network_support import repeated_keys, seeded, shapes
import pytest
import torch

from dreamzero_ros.engine.networks.image_encoder import CLIPConfig, CLIPImageEncoder

NORM_SUFFIXES = ('norm.weight', 'norm1.weight', 'norm2.weight')


def upstream_keys(dim, layers, embed_dim, patch=14, tokens=257):
    """Key -> shape of upstream ``WanImageEncoder`` (open-CLIP ViT with ``model.`` prefix)."""
    keys = {
        'model.log_scale': (),
        'model.visual.cls_embedding': (1, 1, dim),
        'model.visual.pos_embedding': (1, tokens, dim),
        'model.visual.head': (dim, embed_dim),
        'model.visual.patch_embedding.weight': (dim, 3, patch, patch),
    }
    for norm in ('pre_norm', 'post_norm'):
        keys.update({f'model.visual.{norm}.weight': (dim,), f'model.visual.{norm}.bias': (dim,)})
    block = {
        'norm1.weight': (dim,),
        'norm1.bias': (dim,),
        'attn.to_qkv.weight': (3 * dim, dim),
        'attn.to_qkv.bias': (3 * dim,),
        'attn.proj.weight': (dim, dim),
        'attn.proj.bias': (dim,),
        'norm2.weight': (dim,),
        'norm2.bias': (dim,),
        'mlp.0.weight': (4 * dim, dim),
        'mlp.0.bias': (4 * dim,),
        'mlp.2.weight': (dim, 4 * dim),
        'mlp.2.bias': (dim,),
    }
    return {**keys, **repeated_keys('model.visual.transformer', layers, block)}


@pytest.fixture(scope='module')
def tiny():
    return seeded(CLIPImageEncoder(CLIPConfig.tiny()), NORM_SUFFIXES)


def test_vit_h_14_keys_and_shapes_match_upstream():
    config = CLIPConfig.vit_h_14()
    with torch.device('meta'):
        encoder = CLIPImageEncoder(config)
    assert shapes(encoder) == upstream_keys(1280, 32, 1024)
    assert config.num_tokens == 257


def test_tiny_has_the_same_key_structure():
    config = CLIPConfig.tiny()
    expected = upstream_keys(config.dim, config.num_layers, config.embed_dim)
    assert shapes(CLIPImageEncoder(config)) == expected


def test_matches_upstream_reference_values(tiny):
    # Reference: upstream WanImageEncoder.encode_image with the same seeded weights and image.
    images = torch.linspace(-1, 1, 2 * 3 * 40 * 64).view(2, 3, 40, 64).sin()
    out = tiny(images)
    assert out.shape == (2, 257, 32) and out.dtype == torch.float32
    out = out.double().flatten()
    picks = out[torch.linspace(0, out.numel() - 1, 5).long()]
    assert out.sum().item() == pytest.approx(2170.33489, rel=1e-5)
    assert out.abs().sum().item() == pytest.approx(18651.33611, rel=1e-5)
    expected = torch.tensor(
        [1.662737, 1.116403, 1.806478, -1.592493, -1.603101], dtype=torch.double
    )
    torch.testing.assert_close(picks, expected, atol=1e-5, rtol=1e-5)


def test_preprocessing_maps_minus_one_to_one_into_clip_normalisation(tiny):
    config = tiny.config
    images = torch.full((1, 3, 30, 50), 0.2)
    pixels = tiny.preprocess(images)
    assert pixels.shape == (1, 3, 224, 224)
    for channel in range(3):
        expected = (0.6 - config.mean[channel]) / config.std[channel]
        torch.testing.assert_close(pixels[0, channel], torch.full((224, 224), expected))
    # A 224 x 224 image is not resampled.
    images = torch.rand(1, 3, 224, 224) * 2 - 1
    mean = torch.tensor(config.mean).view(1, 3, 1, 1)
    std = torch.tensor(config.std).view(1, 3, 1, 1)
    torch.testing.assert_close(tiny.preprocess(images), ((images + 1) / 2 - mean) / std)


def test_output_is_the_penultimate_block(tiny):
    images = torch.rand(1, 3, 64, 96) * 2 - 1
    reference = tiny(images)
    changed = CLIPImageEncoder(tiny.config).eval()
    changed.load_state_dict(tiny.state_dict())
    with torch.no_grad():
        for name in ('transformer.2', 'post_norm'):
            for param in changed.model.visual.get_submodule(name).parameters():
                param.add_(1.0)
        changed.model.visual.head.add_(1.0)
    torch.testing.assert_close(changed(images), reference)
    with torch.no_grad():
        changed.model.visual.transformer[1].mlp[2].bias.add_(1.0)
    assert not torch.allclose(changed(images), reference)


def test_bfloat16_weights_give_bfloat16_output(tiny):
    encoder = CLIPImageEncoder(tiny.config).eval()
    encoder.load_state_dict(tiny.state_dict())
    encoder.to(torch.bfloat16)
    images = torch.rand(2, 3, 48, 80) * 2 - 1
    out = encoder(images)
    assert out.dtype == torch.bfloat16 and out.shape == (2, 257, 32)
    torch.testing.assert_close(out.float(), tiny(images), atol=0.2, rtol=0.05)


@pytest.mark.parametrize(
    'images',
    [
        torch.zeros(1, 4, 224, 224),
        torch.zeros(3, 224, 224),
        torch.zeros(1, 224, 224, 3),
        torch.zeros(1, 3, 224, 224, dtype=torch.uint8),
    ],
)
def test_bad_images_raise(tiny, images):
    with pytest.raises(ValueError, match='images'):
        tiny(images)
