# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The Wan 2.1 encoder files a checkpoint's ``config.json`` names, found in local folders.

Upstream builds the umT5 text encoder, the CLIP image encoder and the VAE from the Wan2.1
``.pth`` files whose paths ``config.json`` records (``text_encoder_pretrained_path`` ... under
``action_head_cfg.config``): absolute paths on the training machine, or a model hub download
when they are absent.  A checkpoint that carries an encoder's tensors needs none of this; one
that does not (a LoRA-only save, a checkpoint saved without its frozen encoders) gets them
from the file of the recorded name, looked up in a folder the user gives and then in the
checkpoint folder, never at the recorded path and never through a hub.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath, PureWindowsPath
import pickle
from typing import Any

import torch

from dreamzero_ros.errors import CheckpointError

__all__ = ['ENCODERS', 'EncoderFile', 'resolve_encoder_file']


#: Engine component -> (its ``config.json`` block and path key, Wan's file name, the
#: checkpoint prefix the file's tensors go under).
ENCODERS: dict[str, tuple[str, str, str, str]] = {
    'text_encoder': (
        'text_encoder_cfg',
        'text_encoder_pretrained_path',
        'models_t5_umt5-xxl-enc-bf16.pth',
        'action_head.text_encoder.',
    ),
    'image_encoder': (
        'image_encoder_cfg',
        'image_encoder_pretrained_path',
        'models_clip_open-clip-xlm-roberta-large-vit-huge-14.pth',
        'action_head.image_encoder.model.',
    ),
    'vae': ('vae_cfg', 'vae_pretrained_path', 'Wan2.1_VAE.pth', 'action_head.vae.model.'),
}


def resolve_encoder_file(
    config: Mapping[str, Any], component: str, folders: Sequence[str | Path]
) -> Path:
    """The local file of ``component``'s encoder: the recorded file name in ``folders``.

    Args:
        config: ``config.json`` content.
        component: a key of :data:`ENCODERS`.
        folders: where to look, in order (a user's encoder folder, the checkpoint folder).

    """
    block, key, default, _ = ENCODERS[component]
    head = config.get('action_head_cfg', {}).get('config', {})
    recorded = head.get(block, {}).get(key) if isinstance(head, Mapping) else None
    names = [default]
    if isinstance(recorded, str) and recorded:
        # The training machine may have been Windows or POSIX: take the last part either way.
        name = PureWindowsPath(PurePosixPath(recorded).name).name
        names.insert(0, name)
    for folder in folders:
        for name in dict.fromkeys(names):
            path = Path(folder) / name
            if path.is_file():
                return path
    searched = ', '.join(str(folder) for folder in folders)
    raise CheckpointError(
        f'the checkpoint has no {component} tensors and its encoder file '
        f'{names[0]} (recorded as {recorded!r}) is not in {searched}: copy the Wan2.1 file '
        'there or name the folder that holds it'
    )


class EncoderFile:
    """The tensors of one Wan2.1 ``.pth`` encoder file under the checkpoint's names."""

    def __init__(self, path: str | Path, component: str) -> None:
        self.path = Path(path)
        self.prefix = ENCODERS[component][3]
        try:
            state = torch.load(self.path, map_location='cpu', weights_only=True, mmap=True)
        except RuntimeError:  # the legacy (non-zip) format cannot be memory-mapped
            state = self._load_unmapped()
        except (OSError, pickle.UnpicklingError, EOFError) as error:
            raise CheckpointError(f'{self.path} is unreadable: {error}') from error
        if not isinstance(state, Mapping) or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
        ):
            raise CheckpointError(f'{self.path} is not a state dict of tensors')
        self.tensors: dict[str, torch.Tensor] = {self.prefix + k: v for k, v in state.items()}

    def _load_unmapped(self) -> Any:
        try:
            return torch.load(self.path, map_location='cpu', weights_only=True)
        except (OSError, RuntimeError, pickle.UnpicklingError, EOFError) as error:
            raise CheckpointError(f'{self.path} is unreadable: {error}') from error

    @property
    def names(self) -> set[str]:
        """Checkpoint names of the file's tensors."""
        return set(self.tensors)

    def where(self, name: str) -> str:
        """Where ``name`` is read from, for messages."""
        return f'{name!r} from {self.path}'

    def file(self, name: str) -> str:
        """The encoder file's name."""
        return self.path.name

    def shape(self, name: str) -> tuple[int, ...]:
        """Shape of tensor ``name``."""
        return tuple(self.tensors[name].shape)

    def read(self, name: str) -> torch.Tensor:
        """Tensor ``name``."""
        return self.tensors[name]
