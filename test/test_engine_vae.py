# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The Wan VAE: upstream keys and shapes, causal chunked encoding, decoding, reference values."""

import dataclasses

from network_support import seeded, shapes
import pytest
import torch

from dreamzero_ros.engine.networks.vae import WanVAE
from dreamzero_ros.engine.networks.vae_network import CausalConv3d, VAEConfig

# Upstream VideoVAE_ layer lists, channels in units of the base width ``dim``.
ENCODER_DOWNSAMPLES = [
    ('res', 1, 1), ('res', 1, 1), ('down2d', 1),
    ('res', 1, 2), ('res', 2, 2), ('down3d', 2),
    ('res', 2, 4), ('res', 4, 4), ('down3d', 4),
    ('res', 4, 4), ('res', 4, 4),
]  # fmt: skip
DECODER_UPSAMPLES = [
    ('res', 4, 4), ('res', 4, 4), ('res', 4, 4), ('up3d', 4),
    ('res', 2, 4), ('res', 4, 4), ('res', 4, 4), ('up3d', 4),
    ('res', 2, 2), ('res', 2, 2), ('res', 2, 2), ('up2d', 2),
    ('res', 1, 1), ('res', 1, 1), ('res', 1, 1),
]  # fmt: skip
MIDDLE = [('res', 4, 4), ('attn', 4), ('res', 4, 4)]


def layer_keys(kind, dim, *mults):
    c = [dim * m for m in mults]
    if kind == 'res':
        i, o = c
        keys = {
            'residual.0.gamma': (i, 1, 1, 1),
            'residual.2.weight': (o, i, 3, 3, 3),
            'residual.2.bias': (o,),
            'residual.3.gamma': (o, 1, 1, 1),
            'residual.6.weight': (o, o, 3, 3, 3),
            'residual.6.bias': (o,),
        }
        if i != o:
            keys.update({'shortcut.weight': (o, i, 1, 1, 1), 'shortcut.bias': (o,)})
        return keys
    (d,) = c
    if kind == 'attn':
        return {
            'norm.gamma': (d, 1, 1),
            'to_qkv.weight': (3 * d, d, 1, 1),
            'to_qkv.bias': (3 * d,),
            'proj.weight': (d, d, 1, 1),
            'proj.bias': (d,),
        }
    out = d // 2 if kind.startswith('up') else d
    keys = {'resample.1.weight': (out, d, 3, 3), 'resample.1.bias': (out,)}
    if kind.endswith('3d'):
        t_out = 2 * d if kind.startswith('up') else d
        keys.update({'time_conv.weight': (t_out, d, 3, 1, 1), 'time_conv.bias': (t_out,)})
    return keys


def upstream_keys(dim, z_dim=16):
    """Key -> shape of upstream ``WanVideoVAE`` (``model.`` prefix) for base width ``dim``."""
    keys = {
        'model.encoder.conv1.weight': (dim, 3, 3, 3, 3),
        'model.encoder.conv1.bias': (dim,),
        'model.encoder.head.0.gamma': (4 * dim, 1, 1, 1),
        'model.encoder.head.2.weight': (2 * z_dim, 4 * dim, 3, 3, 3),
        'model.encoder.head.2.bias': (2 * z_dim,),
        'model.conv1.weight': (2 * z_dim, 2 * z_dim, 1, 1, 1),
        'model.conv1.bias': (2 * z_dim,),
        'model.conv2.weight': (z_dim, z_dim, 1, 1, 1),
        'model.conv2.bias': (z_dim,),
        'model.decoder.conv1.weight': (4 * dim, z_dim, 3, 3, 3),
        'model.decoder.conv1.bias': (4 * dim,),
        'model.decoder.head.0.gamma': (dim, 1, 1, 1),
        'model.decoder.head.2.weight': (3, dim, 3, 3, 3),
        'model.decoder.head.2.bias': (3,),
    }
    groups = [
        ('model.encoder.downsamples', ENCODER_DOWNSAMPLES),
        ('model.encoder.middle', MIDDLE),
        ('model.decoder.middle', MIDDLE),
        ('model.decoder.upsamples', DECODER_UPSAMPLES),
    ]
    for prefix, layers in groups:
        for index, (kind, *mults) in enumerate(layers):
            for name, shape in layer_keys(kind, dim, *mults).items():
                keys[f'{prefix}.{index}.{name}'] = shape
    return keys


@pytest.fixture(scope='module')
def tiny():
    return seeded(WanVAE(VAEConfig.tiny()), ('gamma',))


def video(frames, height=16, width=24, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(1, 3, frames, height, width, generator=generator) * 2 - 1


def test_wan21_keys_and_shapes_match_upstream():
    with torch.device('meta'):
        vae = WanVAE(VAEConfig.wan21())
    assert shapes(vae) == upstream_keys(96)
    assert sum(p.numel() for p in vae.parameters()) == 126_892_531


def test_tiny_has_the_same_key_set():
    vae = WanVAE(VAEConfig.tiny())
    assert shapes(vae) == upstream_keys(VAEConfig.tiny().dim)
    with torch.device('meta'):
        assert set(vae.state_dict()) == set(WanVAE(VAEConfig.wan21()).state_dict())


def test_encode_matches_upstream_reference_values(tiny):
    # Reference: upstream VideoVAE_.encode with the same seeded weights and video.
    clip = torch.linspace(-1, 1, 3 * 5 * 16 * 24).view(1, 3, 5, 16, 24).mul(7).sin()
    latents = tiny.encode(clip)
    assert latents.shape == (1, 16, 2, 2, 3) and latents.dtype == torch.float32
    flat = latents.double().flatten()
    picks = flat[torch.linspace(0, flat.numel() - 1, 5).long()]
    assert flat.sum().item() == pytest.approx(6.96936, abs=1e-3)
    assert flat.abs().sum().item() == pytest.approx(65.06737, rel=1e-5)
    expected = torch.tensor(
        [0.203255, -0.072924, -0.947628, 0.467549, -0.032787], dtype=torch.double
    )
    torch.testing.assert_close(picks, expected, atol=1e-5, rtol=1e-5)


def test_decode_matches_upstream_reference_values(tiny):
    # Reference: upstream VideoVAE_.decode (then clamp) with the same weights and latents.
    latents = torch.linspace(-2, 2, 16 * 2 * 2 * 3).view(1, 16, 2, 2, 3).mul(5).cos()
    frames = tiny.decode(latents)
    assert frames.shape == (1, 3, 5, 16, 24)
    flat = frames.double().flatten()
    picks = flat[torch.linspace(0, flat.numel() - 1, 5).long()]
    assert flat.sum().item() == pytest.approx(-470.26371, rel=1e-5)
    assert flat.abs().sum().item() == pytest.approx(3017.9021, rel=1e-5)
    expected = torch.tensor(
        [0.250147, 0.485437, -0.378481, 0.678129, -0.112574], dtype=torch.double
    )
    torch.testing.assert_close(picks, expected, atol=1e-5, rtol=1e-5)


def test_round_trip_shapes(tiny):
    latents = tiny.encode(video(9, 32, 48))
    assert latents.shape == (1, 16, 3, 4, 6)
    frames = tiny.decode(latents)
    assert frames.shape == (1, 3, 9, 32, 48)
    assert frames.min() >= -1 and frames.max() <= 1


def test_chunked_encode_equals_one_shot(tiny):
    clip = video(13)
    whole = tiny.encode(clip)
    stream = tiny.encode_stream()
    pieces = [stream.push(clip[:, :, a:b]) for a, b in ((0, 1), (1, 4), (4, 10), (10, 13))]
    assert [p.shape[2] for p in pieces] == [1, 0, 2, 1]
    torch.testing.assert_close(torch.cat(pieces, dim=2), whole, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(tiny.encode(clip, frames_per_pass=12), whole, atol=1e-5, rtol=1e-5)


def test_encoding_is_causal(tiny):
    clip = video(9)
    later = clip.clone()
    later[:, :, 5:] = -later[:, :, 5:]
    first, second = tiny.encode(clip), tiny.encode(later)
    torch.testing.assert_close(first[:, :, :2], second[:, :, :2])
    assert not torch.allclose(first[:, :, 2], second[:, :, 2])


def test_batch_rows_are_independent(tiny):
    clips = torch.cat([video(5, seed=1), video(5, seed=2)])
    batched = tiny.encode(clips)
    torch.testing.assert_close(batched[1:], tiny.encode(clips[1:]), atol=1e-5, rtol=1e-5)


def test_chunked_decode_equals_one_shot(tiny):
    latents = torch.randn(2, 16, 4, 2, 3)
    whole = tiny.decode(latents)
    assert whole.shape == (2, 3, 13, 16, 24)
    stream = tiny.decode_stream()
    pieces = [stream.push(latents[:, :, a:b]) for a, b in ((0, 1), (1, 3), (3, 4))]
    assert [p.shape[2] for p in pieces] == [1, 8, 4]
    torch.testing.assert_close(torch.cat(pieces, dim=2), whole, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(tiny.decode(latents, latents_per_pass=3), whole, atol=1e-5,
                               rtol=1e-5)  # fmt: skip


def test_latents_are_normalised_with_config_constants(tiny):
    raw_config = dataclasses.replace(tiny.config, latents_mean=(0.0,) * 16, latents_std=(1.0,) * 16)
    raw = WanVAE(raw_config).eval()
    raw.load_state_dict(tiny.state_dict())
    clip = video(5)
    mean = torch.tensor(tiny.config.latents_mean).view(1, 16, 1, 1, 1)
    std = torch.tensor(tiny.config.latents_std).view(1, 16, 1, 1, 1)
    torch.testing.assert_close(tiny.encode(clip), (raw.encode(clip) - mean) / std)
    latents = torch.randn(1, 16, 2, 2, 3)
    torch.testing.assert_close(tiny.decode(latents), raw.decode(latents * std + mean))


def test_bfloat16_weights(tiny):
    vae = WanVAE(tiny.config).eval()
    vae.load_state_dict(tiny.state_dict())
    vae.to(torch.bfloat16)
    clip = video(5)
    latents = vae.encode(clip)
    assert latents.dtype == torch.bfloat16
    torch.testing.assert_close(latents.float(), tiny.encode(clip), atol=0.15, rtol=0.05)
    assert vae.decode(latents).dtype == torch.bfloat16


@pytest.mark.parametrize(
    ('clip', 'message'),
    [
        (torch.zeros(1, 3, 4, 16, 24), '1 \\+ 4k'),
        (torch.zeros(1, 3, 5, 12, 24), 'multiples of 8'),
        (torch.zeros(1, 4, 5, 16, 24), r'\(B, 3, T, H, W\)'),
        (torch.zeros(3, 5, 16, 24), r'\(B, 3, T, H, W\)'),
        (torch.zeros(1, 3, 5, 16, 24, dtype=torch.uint8), 'floating point'),
    ],
)
def test_bad_videos_raise(tiny, clip, message):
    with pytest.raises(ValueError, match=message):
        tiny.encode(clip)


@pytest.mark.parametrize(
    ('kernel', 'stride', 'padding', 'frames'),
    [(3, 1, 1, 5), ((3, 1, 1), (2, 1, 1), 0, 7), ((3, 1, 1), 1, (1, 0, 0), 2)],
)
def test_cpu_2d_form_of_the_causal_convolution_is_exact(kernel, stride, padding, frames):
    conv = CausalConv3d(6, 5, kernel, stride=stride, padding=padding)
    x = torch.randn(2, 6, frames, 66, 70)
    padded = torch.nn.functional.pad(x, (0, 0, 0, 0, conv.time_padding, 0))
    with torch.no_grad():
        reference = torch.nn.functional.conv3d(
            padded, conv.weight, conv.bias, conv.stride, (0, *conv.space_padding)
        )
        torch.testing.assert_close(conv._forward_as_2d(padded), reference, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(conv(x), reference, atol=1e-5, rtol=1e-5)


def test_bad_stream_and_latents_raise(tiny):
    stream = tiny.encode_stream()
    stream.push(video(2))
    with pytest.raises(ValueError, match='continue'):
        stream.push(video(4, height=24))
    with pytest.raises(ValueError, match='multiple of 4'):
        tiny.encode_stream(frames_per_pass=6)
    with pytest.raises(ValueError, match='latents'):
        tiny.decode(torch.zeros(1, 8, 2, 2, 3))
    with pytest.raises(ValueError, match='latents'):
        tiny.decode(torch.zeros(1, 16, 0, 2, 3))
