# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The umT5 text encoder: upstream key names and shapes, padding semantics, reference values."""

from network_support import repeated_keys, seeded, shapes
import pytest
import torch

from dreamzero_ros.engine.networks.text_encoder import (
    T5Config,
    UMT5Encoder,
    relative_position_buckets,
)

NORM_SUFFIXES = ('gamma', 'norm.weight', 'norm1.weight', 'norm2.weight')


def upstream_keys(vocab, dim, dim_attn, dim_ffn, heads, layers, buckets):
    """Key -> shape of upstream ``WanTextEncoder`` (shared_pos=False)."""
    block = {
        'norm1.weight': (dim,),
        'attn.q.weight': (dim_attn, dim),
        'attn.k.weight': (dim_attn, dim),
        'attn.v.weight': (dim_attn, dim),
        'attn.o.weight': (dim, dim_attn),
        'norm2.weight': (dim,),
        'ffn.gate.0.weight': (dim_ffn, dim),
        'ffn.fc1.weight': (dim_ffn, dim),
        'ffn.fc2.weight': (dim, dim_ffn),
        'pos_embedding.embedding.weight': (buckets, heads),
    }
    return {
        'token_embedding.weight': (vocab, dim),
        'norm.weight': (dim,),
        **repeated_keys('blocks', layers, block),
    }


@pytest.fixture(scope='module')
def tiny():
    return seeded(UMT5Encoder(T5Config.tiny()), NORM_SUFFIXES)


def test_umt5_xxl_keys_and_shapes_match_upstream():
    with torch.device('meta'):
        encoder = UMT5Encoder(T5Config.umt5_xxl())
    assert shapes(encoder) == upstream_keys(256384, 4096, 4096, 10240, 64, 24, 32)
    assert sum(p.numel() for p in encoder.parameters()) == 5_680_910_336


def test_tiny_has_the_same_key_structure():
    cfg = T5Config.tiny()
    expected = upstream_keys(cfg.vocab_size, cfg.dim, cfg.dim_attn, cfg.dim_ffn, cfg.num_heads,
                             cfg.num_layers, cfg.num_buckets)  # fmt: skip
    assert shapes(UMT5Encoder(cfg)) == expected


def test_relative_position_buckets():
    buckets = relative_position_buckets(300, num_buckets=32, max_distance=128)
    # buckets[q, k] for relative position k - q; keys after the query use the upper half.
    assert buckets[5, 5] == 0
    assert buckets[5, 2] == 3 and buckets[2, 5] == 16 + 3
    assert buckets[25, 5] == 8 + 2  # distance 20: 8 + int(log(20 / 8) / log(16) * 8)
    assert buckets[0, 250] == 31 and buckets[250, 0] == 15
    assert buckets.min() == 0 and buckets.max() == 31


def test_matches_upstream_reference_values(tiny):
    # Reference: upstream WanTextEncoder with the same seeded weights and inputs.
    ids = (torch.arange(2 * 40).view(2, 40) * 37) % tiny.config.vocab_size
    mask = (torch.arange(40).unsqueeze(0) < torch.tensor([[12], [40]])).long()
    with torch.no_grad():
        out = tiny(ids, mask).double().flatten()
    picks = out[torch.linspace(0, out.numel() - 1, 5).long()]
    assert out.sum().item() == pytest.approx(35.58705, abs=2e-3)
    assert out.abs().sum().item() == pytest.approx(2048.5815, rel=1e-5)
    expected = torch.tensor(
        [-0.152468, 0.437429, -2.308329, 0.501719, 0.677896], dtype=torch.double
    )
    torch.testing.assert_close(picks, expected, atol=1e-5, rtol=1e-5)


def test_padding_keys_do_not_affect_real_tokens(tiny):
    ids = torch.randint(3, tiny.config.vocab_size, (1, 24))
    mask = torch.zeros(1, 24, dtype=torch.int64)
    mask[:, :9] = 1
    other = ids.clone()
    other[:, 9:] = torch.randint(3, tiny.config.vocab_size, (1, 15))
    with torch.no_grad():
        first, second = tiny(ids, mask), tiny(other, mask)
    torch.testing.assert_close(first[:, :9], second[:, :9])
    assert not torch.allclose(first[:, 9:], second[:, 9:])


def test_encode_zeroes_padding_and_equals_forward(tiny):
    ids = torch.randint(3, tiny.config.vocab_size, (2, 64))
    mask = torch.zeros(2, 64, dtype=torch.int64)
    mask[0, :10] = 1
    mask[1, :23] = 1
    with torch.no_grad():
        full = tiny(ids, mask)
    encoded = tiny.encode(ids, mask)
    assert encoded.shape == (2, 64, tiny.config.dim)
    assert encoded[0, 10:].eq(0).all() and encoded[1, 23:].eq(0).all()
    torch.testing.assert_close(encoded[0, :10], full[0, :10], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(encoded[1, :23], full[1, :23], atol=1e-5, rtol=1e-5)
    # Each row is independent of the others in the batch.
    torch.testing.assert_close(tiny.encode(ids[:1], mask[:1]), encoded[:1], atol=1e-5, rtol=1e-5)


def test_bfloat16_weights_give_bfloat16_output(tiny):
    encoder = UMT5Encoder(T5Config.tiny()).eval()
    encoder.load_state_dict(tiny.state_dict())
    encoder.to(torch.bfloat16)
    ids = torch.randint(3, 100, (1, 16))
    mask = torch.ones_like(ids, dtype=torch.bool)
    out = encoder.encode(ids, mask)
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()
    torch.testing.assert_close(out.float(), tiny.encode(ids, mask), atol=0.1, rtol=0.05)


def test_bad_inputs_raise(tiny):
    ids = torch.zeros(1, 8, dtype=torch.int64)
    with pytest.raises(ValueError, match='integer tensor'):
        tiny(ids.float(), torch.ones(1, 8))
    with pytest.raises(ValueError, match='integer tensor'):
        tiny(ids[0], torch.ones(8))
    with pytest.raises(ValueError, match='differs'):
        tiny(ids, torch.ones(1, 9, dtype=torch.int64))
    with pytest.raises(ValueError, match='mask'):
        tiny.encode(ids, torch.ones(1, 8))
    with pytest.raises(ValueError, match='token ids'):
        tiny(ids + tiny.config.vocab_size, torch.ones(1, 8, dtype=torch.int64))
    with pytest.raises(ValueError, match='token ids'):
        tiny.encode(ids - 1, torch.ones(1, 8, dtype=torch.int64))
    with pytest.raises(ValueError, match='divisible'):
        T5Config(dim_attn=10, num_heads=4)
