# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""FP8 e4m3 linears: quantization and products close to the exact ones."""

from dit_support import rel
import pytest
import torch

from dreamzero_ros.engine.networks.fp8 import fp8_linear, quantize, quantize_weight


@pytest.mark.parametrize('mode', ['rowwise', 'tensorwise'])
def test_fp8_linear_is_close_to_the_exact_product(mode):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 40, 64, generator=g).to(torch.bfloat16)
    x[0, 0] *= 30  # an outlier row: rowwise scaling keeps the other rows accurate
    weight = (torch.randn(48, 64, generator=g) * 0.1).to(torch.bfloat16)
    bias = torch.randn(48, generator=g).to(torch.bfloat16)
    quantized = quantize_weight(weight, bias, mode)
    assert quantized.weight.dtype == torch.float8_e4m3fn
    assert quantized.scale.shape == ((1, 48) if mode == 'rowwise' else ())
    out = fp8_linear(x, *quantized.as_tuple())
    exact = x.double() @ weight.double().T + bias.double()
    assert out.shape == (3, 40, 48) and out.dtype == torch.bfloat16
    assert rel(out, exact) < 0.05
    assert rel(out[1:], exact[1:]) < (0.05 if mode == 'rowwise' else 0.2)


def test_quantize_round_trip_and_errors():
    x = torch.randn(8, 32)
    values, scale = quantize(x, rowwise=True)
    assert scale.shape == (8, 1)
    assert float(values.float().abs().max()) <= 448
    assert rel(values.float() * scale, x) < 0.05
    with pytest.raises(ValueError, match='multiples of 16'):
        quantize_weight(torch.randn(48, 20), None, 'rowwise')
    with pytest.raises(ValueError, match='fp8 scaling'):
        quantize_weight(torch.randn(48, 32), None, 'blockwise')
