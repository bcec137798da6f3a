# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The four networks of the engine, built on their device in their dtype."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from .checkpoint import randomize_, skip_init
from .config import EngineConfig
from .dit import CausalWanDiT
from .image_encoder import CLIPImageEncoder
from .text_encoder import UMT5Encoder
from .vae import WanVAE

__all__ = ['EngineModules', 'build_modules']


@dataclass
class EngineModules:
    """The four networks of the engine."""

    dit: CausalWanDiT
    text_encoder: UMT5Encoder
    image_encoder: CLIPImageEncoder
    vae: WanVAE

    def as_dict(self) -> dict[str, nn.Module]:
        """Name -> module, with the names of :data:`.checkpoint.COMPONENT_PREFIXES`."""
        return {
            'dit': self.dit,
            'text_encoder': self.text_encoder,
            'image_encoder': self.image_encoder,
            'vae': self.vae,
        }


def build_modules(config: EngineConfig, seed: int | None = None) -> EngineModules:
    """Construct the networks on ``config.device`` in ``config.dtype``, in inference mode.

    Parameters are allocated once, in the final dtype, without running initialisers; with
    ``seed`` they are filled with seeded random values, otherwise they await a checkpoint.
    """
    with skip_init(config.device, config.torch_dtype):
        modules = EngineModules(
            dit=CausalWanDiT(config.dit),
            text_encoder=UMT5Encoder(config.text_encoder),
            image_encoder=CLIPImageEncoder(config.image_encoder),
            vae=WanVAE(config.vae),
        )
    for offset, module in enumerate(modules.as_dict().values()):
        module.eval().requires_grad_(False)
        if seed is not None:
            randomize_(module, seed + offset)
    return modules
