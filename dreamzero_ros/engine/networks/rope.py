# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Rotary position embeddings of the causal Wan DiT: 3-D for video tokens, 1-D for action/state.

Each attention head of size ``d`` is rotated as ``d / 2`` complex pairs of adjacent channels
``(x[2i], x[2i + 1])``.  Video tokens split those pairs over the three axes of the latent grid:
``d/2 - 2 * (d // 6)`` pairs follow the frame index (22 of 64 for ``d = 128``, i.e. 44 channels),
``d // 6`` the row and ``d // 6`` the column (42 channels each).  Frame positions are absolute
within a context window (``start_frame + f``), so cached keys keep their rotation.

Action and state tokens use a 1-D embedding over the whole head dimension, indexed by the chunk:
chunk ``c`` (``c = (start_frame - 1) // num_frame_per_block``) takes action positions
``[c * A, (c + 1) * A)`` and state positions ``[c * S, (c + 1) * S)`` of two separate tables.

The angle tables are built once in float64 (``theta = 10000``) and kept as float32 cos/sin on the
model's device; :func:`apply_rotary` rotates in float32 and returns the input dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ['RopeTables', 'Rotary', 'apply_rotary', 'rope_angles', 'rotate', 'video_axis_pairs']

# Table sizes of the upstream model (positions beyond these are an error).
MAX_FRAME_POSITIONS = 1024
MAX_ACTION_POSITIONS = 1024 * 10
MAX_STATE_POSITIONS = 1024


def rope_angles(num_positions: int, dim: int, theta: float = 10000.0) -> torch.Tensor:
    """Angles ``p * theta^(-2i/dim)``, float64, shape ``(num_positions, dim // 2)``."""
    if dim % 2:
        raise ValueError(f'rotary dimension must be even, got {dim}')
    inv_freq = 1.0 / torch.pow(theta, torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    return torch.outer(torch.arange(num_positions, dtype=torch.float64), inv_freq)


def video_axis_pairs(head_dim: int) -> tuple[int, int, int]:
    """Complex pairs given to the (frame, row, column) axes for a head of ``head_dim`` channels."""
    if head_dim % 2:
        raise ValueError(f'head_dim must be even, got {head_dim}')
    spatial = head_dim // 6
    return head_dim // 2 - 2 * spatial, spatial, spatial


@dataclass(frozen=True)
class Rotary:
    """Per-token rotation of one DiT call: cos and sin of shape ``(tokens, head_dim // 2)``."""

    cos: torch.Tensor
    sin: torch.Tensor

    def __len__(self) -> int:
        return self.cos.shape[0]

    @staticmethod
    def cat(parts: list[Rotary]) -> Rotary:
        """Concatenate rotations of consecutive token segments."""
        return Rotary(torch.cat([p.cos for p in parts]), torch.cat([p.sin for p in parts]))


def apply_rotary(x: torch.Tensor, rotary: Rotary) -> torch.Tensor:
    """Rotate ``x`` of shape ``(B, L, heads, head_dim)`` by ``rotary`` (``L`` tokens)."""
    return rotate(x, rotary.cos, rotary.sin)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """:func:`apply_rotary` on plain ``cos, sin (L, head_dim // 2)`` tables (compile friendly)."""
    b, length, heads, dim = x.shape
    pairs = x.float().view(b, length, heads, dim // 2, 2)
    real, imag = pairs.unbind(-1)
    cos = cos[:, None, :]
    sin = sin[:, None, :]
    out = torch.stack((real * cos - imag * sin, real * sin + imag * cos), dim=-1)
    return out.flatten(3).to(x.dtype)


class RopeTables:
    """Precomputed float32 cos/sin tables of every rotary axis, on one device."""

    def __init__(self, head_dim: int, device: torch.device | str = 'cpu') -> None:
        frame_pairs, row_pairs, col_pairs = video_axis_pairs(head_dim)
        self.head_dim = head_dim
        self.device = torch.device(device)
        self._frame = self._table(MAX_FRAME_POSITIONS, 2 * frame_pairs)
        self._row = self._table(MAX_FRAME_POSITIONS, 2 * row_pairs)
        self._col = self._table(MAX_FRAME_POSITIONS, 2 * col_pairs)
        self._action = self._table(MAX_ACTION_POSITIONS, head_dim)
        self._state = self._table(MAX_STATE_POSITIONS, head_dim)

    def _table(self, positions: int, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
        angles = rope_angles(positions, dim)
        return (
            angles.cos().to(device=self.device, dtype=torch.float32),
            angles.sin().to(device=self.device, dtype=torch.float32),
        )

    def video(self, start_frame: int, frames: int, height: int, width: int) -> Rotary:
        """Rotation of ``frames x height x width`` tokens (frame-major) from ``start_frame``."""
        if start_frame < 0 or start_frame + frames > MAX_FRAME_POSITIONS:
            raise ValueError(
                f'frames [{start_frame}, {start_frame + frames}) outside the rotary table '
                f'of {MAX_FRAME_POSITIONS} frames'
            )
        if height > MAX_FRAME_POSITIONS or width > MAX_FRAME_POSITIONS:
            raise ValueError(f'latent grid {height}x{width} exceeds {MAX_FRAME_POSITIONS}')
        shape = (frames, height, width)
        parts = []
        for k in range(2):  # cos, sin
            f = self._frame[k][start_frame : start_frame + frames]
            h = self._row[k][:height]
            w = self._col[k][:width]
            parts.append(
                torch.cat(
                    [
                        f[:, None, None, :].expand(*shape, -1),
                        h[None, :, None, :].expand(*shape, -1),
                        w[None, None, :, :].expand(*shape, -1),
                    ],
                    dim=-1,
                ).reshape(frames * height * width, -1)
            )
        return Rotary(parts[0], parts[1])

    def registers(self, chunk_index: int, num_action: int, num_state: int) -> Rotary:
        """Rotation of the ``num_action`` action then ``num_state`` state tokens of a chunk."""
        a0, s0 = chunk_index * num_action, chunk_index * num_state
        if (
            chunk_index < 0
            or a0 + num_action > MAX_ACTION_POSITIONS
            or (s0 + num_state > MAX_STATE_POSITIONS)
        ):
            raise ValueError(f'chunk index {chunk_index} outside the action/state rotary tables')
        return Rotary(
            torch.cat([self._action[0][a0 : a0 + num_action], self._state[0][s0 : s0 + num_state]]),
            torch.cat([self._action[1][a0 : a0 + num_action], self._state[1][s0 : s0 + num_state]]),
        )
