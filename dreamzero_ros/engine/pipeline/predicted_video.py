# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What the model saw and imagined for one chunk, kept cheaply and decoded only on request.

The engine attaches a :class:`ChunkViews` to a chunk when the caller asks
(``DreamZeroEngine.infer(..., predicted_video=True, model_input=True)``): the predicted video
latents and the stitched frame the model was given, still on the engine's device.  Nothing is
decoded on the command path; a consumer (the node's view publisher, a benchmark) calls
:meth:`ChunkViews.decode_predicted` and :meth:`ChunkViews.model_input_frame` later, in its own
thread.

The predicted latents are decoded after the newest observed latent (the last latent of the
chunk's context), whose own decoded frame is then dropped: the causal VAE decoder starts from
what the model saw, and every chunk gives ``4 * num_frame_per_block`` future frames (DROID: 8).
:func:`unstitch` cuts a stitched frame back into the camera views of its layout
(:mod:`.stitching` is the inverse).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import threading

import numpy as np
import torch

from dreamzero_ros.engine.embodiment import LAYOUTS
from dreamzero_ros.engine.networks.vae import WanVAE

__all__ = ['ChunkViews', 'decode_to_uint8', 'unstitch']


def decode_to_uint8(vae: WanVAE, latents: torch.Tensor) -> np.ndarray:
    """VAE-decode normalised ``latents (1, z, n, h, w)`` to host RGB uint8 ``(T, 8h, 8w, 3)``."""
    return _video_to_uint8(vae.decode(latents)[0])


def _video_to_uint8(video: torch.Tensor) -> np.ndarray:
    """``(3, T, H, W)`` in ``[-1, 1]`` -> host RGB uint8 ``(T, H, W, 3)``."""
    frames = ((video.float() + 1.0) * 127.5).round_().clamp_(0, 255).to(torch.uint8)
    return frames.permute(1, 2, 3, 0).cpu().numpy()


def unstitch(frames: np.ndarray, layout: str, views: int) -> list[np.ndarray]:
    """Cut stitched ``(..., H, W, 3)`` frames into the ``views`` camera views of ``layout``.

    The inverse of :func:`.stitching.stitch`, in the model's camera order; DROID's wrist view,
    stitched twice as wide, comes back at its own size (pairs of columns averaged).
    """
    if layout not in LAYOUTS:
        raise ValueError(f'unknown layout {layout!r}; choose from {list(LAYOUTS)}')
    low, high = LAYOUTS[layout]
    if not low <= views <= high:
        raise ValueError(f'layout {layout!r} takes {low}..{high} views, got {views}')
    if layout == 'single':
        return [frames]
    height, width = frames.shape[-3] // 2, frames.shape[-2] // 2
    bottom = frames[..., height:, :, :]
    if layout == 'droid':
        top = frames[..., :height, :, :].astype(np.uint16)
        wrist = ((top[..., 0::2, :] + top[..., 1::2, :] + 1) // 2).astype(np.uint8)
        return [bottom[..., :width, :], bottom[..., width:, :], wrist]
    corners = [
        frames[..., :height, :width, :],
        frames[..., height:, :width, :],
        frames[..., :height, width:, :],
    ]
    return corners[:views]


class ChunkViews:
    """The predicted latents and model input of one chunk, decoded on demand (thread-safe).

    Args:
        vae: the engine's VAE (read-only here; decoding may overlap the next inference).
        layout: the embodiment's stitching layout.
        camera_keys: the cameras in the model's order.
        latents: ``(1, z, 1 + n, h, w)``: the newest observed latent then ``n`` predicted
            ones; None when the predicted video was not asked for.
        model_input: the stitched uint8 ``(H, W, 3)`` frame the model was given (the newest),
            on the engine's device; None when not asked for.

    """

    def __init__(
        self,
        vae: WanVAE,
        layout: str,
        camera_keys: Sequence[str],
        latents: torch.Tensor | None,
        model_input: torch.Tensor | None,
    ) -> None:
        self._vae = vae
        self.layout = layout
        self.camera_keys = tuple(camera_keys)
        self.latents = latents
        self._model_input = model_input
        self._decoded: np.ndarray | None = None
        self._lock = threading.Lock()

    @property
    def has_predicted_video(self) -> bool:
        """Whether predicted latents were kept."""
        return self.latents is not None

    @property
    def has_model_input(self) -> bool:
        """Whether the model input was kept."""
        return self._model_input is not None

    @torch.no_grad()
    def decode_predicted(self, stop: Callable[[], bool] | None = None) -> np.ndarray | None:
        """The predicted future frames, stitched: uint8 ``(4 n, H, W, 3)``, oldest first.

        Decoded once; later calls return the same (read-only) array. With ``stop``, the
        latents are decoded one at a time (the same frames) and ``stop()`` is asked before
        each: True abandons the decode and returns None (a later call starts again).
        """
        if self.latents is None:
            raise ValueError('the predicted video was not kept for this chunk')
        with self._lock:
            if self._decoded is None:
                if stop is None:
                    decoded = decode_to_uint8(self._vae, self.latents)
                else:
                    stream = self._vae.decode_stream()
                    pieces = []
                    for index in range(self.latents.shape[2]):
                        if stop():
                            return None
                        pieces.append(stream.push(self.latents[:, :, index : index + 1]))
                    decoded = _video_to_uint8(torch.cat(pieces, dim=2)[0])
                self._decoded = decoded[1:]
                self._decoded.flags.writeable = False
            return self._decoded

    def model_input_frame(self) -> np.ndarray:
        """The stitched uint8 ``(H, W, 3)`` frame the model was given."""
        if self._model_input is None:
            raise ValueError('the model input was not kept for this chunk')
        return self._model_input.cpu().numpy()

    def per_camera(self, frames: np.ndarray) -> dict[str, np.ndarray]:
        """Stitched frames -> camera key -> that camera's view of them."""
        parts = unstitch(frames, self.layout, len(self.camera_keys))
        return dict(zip(self.camera_keys, parts, strict=True))
