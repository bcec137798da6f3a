# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""DreamZero's causal Wan2.1-I2V video DiT with action and state tokens.

This is the network of upstream ``CausalWanModel`` (``wan_video_dit_action_casual_chunk.py``), for
inference with a K/V cache.  Module attribute names reproduce upstream's ``state_dict`` keys, so the
released checkpoint's ``action_head.model.<key>`` tensors load unchanged once the prefix is
stripped (``test/test_engine_dit_keys.py`` lists every key and shape of the 14B model).

One DiT call processes the tokens ``[video | action | state]``:

* video: ``cat([latents (16 ch), y (4 mask + 16 first-frame ch)])`` -> ``Conv3d`` patches of
  (1, 2, 2) -> ``frames * (H/2) * (W/2)`` tokens (frame-major), 3-D rotary positions from
  ``start_frame``;
* action (denoising calls only): ``action_encoder(noisy actions, action timestep)``, 1-D rotary;
* state (denoising calls only): ``state_encoder(state)``, 1-D rotary, modulated with the action
  timestep (upstream takes every ``A / S``-th action timestep for the state tokens).

Each token is modulated (AdaLN, six vectors per block) by the embedding of its own timestep:
per frame for video (0 for clean prefill frames), per action token for actions.  Timestep
embeddings are computed once per frame / register token and broadcast to the frame's tokens.
Blocks: self-attention with QK RMSNorm and rotary embeddings (through a
:class:`~.attention.SelfAttentionBackend`, normally the K/V cache), I2V
cross-attention over projected CLIP tokens (257 x 1280) and text tokens (512 x 4096), GELU FFN.
The video head (AdaLN + linear) and unpatchify give the video velocity ``(B, 16, F, H, W)``; the
action decoder maps the action tokens' outputs to the action velocity ``(B, A, action_dim)``.

Cross-attention keys and values depend only on the prompt and the CLIP tokens, so they are
projected once per context window by :meth:`CausalWanDiT.prepare_context` (upstream recomputes
them every call; the result is the same).  A prefill needs only the keys and values of its clean
frames, so its last block stops once they are cached.

This is the reference model, and the one that runs: speed is applied from outside, as diffusers
does for Wan (:mod:`.acceleration`): module transforms that compute the same function (one q/k/v
product, FP8 linears, the FFN's GELU in its product's epilogue) and ``torch.compile`` of each
:class:`DiTBlock` as written.  Attention runs in the ops of :mod:`.attention`
(``dreamzero::kv_cache_attention`` over the K/V cache, ``dreamzero::attention`` for the
cross-attention), which own the attention kernel.  A tensor-parallel shard
(:mod:`.tensor_parallel`) sums the outputs of its row-parallel linears over its group
(:func:`.collectives.all_reduce_sum`, identity for a whole model).

Numerics follow upstream: RMSNorm in float32, sinusoidal time features in float64 cast to the
model dtype, rotary embeddings in float32 (upstream: float64) cast back to the model dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from dreamzero_ros.engine.networks.attention import SelfAttentionBackend
from dreamzero_ros.engine.networks.dit_block import (
    ActionEncoder,
    CategorySpecificMLP,
    DiTBlock,
    Head,
    ImageProjection,
    Modulation,
    sinusoidal_embedding,
)
from dreamzero_ros.engine.networks.dit_config import DiTConfig
from dreamzero_ros.engine.networks.kv_cache import KV_CACHES, KVCache
from dreamzero_ros.engine.networks.rope import RopeTables, Rotary

__all__ = ['CausalWanDiT', 'CrossAttentionContext', 'DiTOutput']


@dataclass(frozen=True)
class DiTOutput:
    """Velocities predicted by one denoising call."""

    video: torch.Tensor  # (B, out_dim, F, H, W)
    action: torch.Tensor  # (B, num_action, action_dim)


@dataclass(frozen=True)
class CrossAttentionContext:
    """Projected cross-attention keys/values of every block, ``(B, L, heads, head_dim)`` each.

    ``layers[i] = (k_text, v_text, k_image, v_image)``.
    """

    layers: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]

    def rows(self, count: int) -> CrossAttentionContext:
        """The first ``count`` rows of the batch (views)."""
        return CrossAttentionContext([tuple(t[:count] for t in ls) for ls in self.layers])

    @staticmethod
    def cat(parts: list[CrossAttentionContext]) -> CrossAttentionContext:
        """Stack contexts along the batch (e.g. conditional then unconditional)."""
        return CrossAttentionContext(
            [
                tuple(torch.cat(ts, dim=0) for ts in zip(*ls, strict=True))
                for ls in zip(*(p.layers for p in parts), strict=True)
            ]
        )


class CausalWanDiT(nn.Module):
    """The causal Wan DiT with action/state tokens; see the module docstring.

    Typical use (the denoiser does this)::

        ctx = dit.prepare_context(text_embeds, clip_tokens)       # once per window and prompt
        cache = dit.new_cache(batch)                               # once per session/window
        dit.prefill(clean_latents, y_clean, ctx, cache, start_frame)  # commits clean K/V
        out = dit(noisy_latents, y, t_video, ctx, cache, start_frame,
                  action=noisy_actions, timestep_action=t_action, state=state)

    """

    def __init__(self, config: DiTConfig) -> None:
        super().__init__()
        self.config = config
        dim = config.dim
        self.state_encoder = CategorySpecificMLP(1, config.max_state_dim, config.hidden_size, dim)
        self.action_encoder = ActionEncoder(config.action_dim, dim)
        self.action_decoder = CategorySpecificMLP(1, dim, config.hidden_size, config.action_dim)
        self.patch_embedding = nn.Conv3d(
            config.in_dim, dim, kernel_size=config.patch_size, stride=config.patch_size
        )
        self.text_embedding = nn.Sequential(
            nn.Linear(config.text_dim, dim), nn.GELU(approximate='tanh'), nn.Linear(dim, dim)
        )
        self.time_embedding = nn.Sequential(
            nn.Linear(config.freq_dim, dim), nn.SiLU(), nn.Linear(dim, dim)
        )
        self.time_projection = nn.Sequential(nn.SiLU(), nn.Linear(dim, dim * 6))
        self.blocks = nn.ModuleList([DiTBlock(config) for _ in range(config.num_layers)])
        self.head = Head(dim, config.out_dim, config.patch_size, config.eps)
        self.img_emb = ImageProjection(config.clip_dim, dim)
        self._rope: RopeTables | None = None
        self._rotary: dict[tuple, Rotary] = {}
        #: This rank's :class:`~.tensor_parallel.TensorParallelShard`, set from outside by
        #: :func:`~.tensor_parallel.shard_dit_`; None for the whole model.
        self.tensor_parallel: Any = None

    @property
    def device(self) -> torch.device:
        """Device of the parameters."""
        return self.patch_embedding.weight.device

    @property
    def dtype(self) -> torch.dtype:
        """Compute dtype (the parameters' dtype)."""
        return self.patch_embedding.weight.dtype

    def rope_tables(self) -> RopeTables:
        """Rotary tables on the model's device (built once, rebuilt if the model moves)."""
        if self._rope is None or self._rope.device != self.device:
            self._rope = RopeTables(self.config.head_dim, self.device)
            self._rotary.clear()
        return self._rope

    def rotary(self, start_frame: int, grid: tuple[int, int, int], registers: bool) -> Rotary:
        """Rotation of a call's tokens: video from ``start_frame``, then action/state if asked.

        Memoised (a chunk's 16 steps share one), so a denoising step builds no tables.
        """
        tables = self.rope_tables()
        key = (start_frame, grid, registers)
        rotary = self._rotary.get(key)
        if rotary is None:
            c = self.config
            rotary = tables.video(start_frame, *grid)
            if registers:
                chunk = (start_frame - 1) // c.num_frame_per_block
                rotary = Rotary.cat(
                    [
                        rotary,
                        tables.registers(chunk, c.num_action_per_block, c.num_state_per_block),
                    ]
                )
            if len(self._rotary) >= 64:
                self._rotary.clear()
            self._rotary[key] = rotary
        return rotary

    def new_cache(self, batch: int, kind: str = 'model') -> KVCache:
        """An empty K/V cache for ``batch`` rows on the model's device.

        ``kind``: ``model`` (keys and values in the model dtype) or ``fp8``
        (:class:`~.kv_cache.Fp8KVCache`).
        """
        c = self.config
        return KV_CACHES[kind](
            c.num_layers,
            batch,
            self.blocks[0].self_attn.num_heads,  # heads held here (fewer under tensor parallel)
            c.head_dim,
            c.max_attention_tokens,
            c.register_tokens,
            self.dtype,
            self.device,
        )

    def prepare_context(
        self, text_embeds: torch.Tensor, clip_tokens: torch.Tensor
    ) -> CrossAttentionContext:
        """Project text ``(B, text_len, text_dim)`` and CLIP ``(B, 257, clip_dim)`` for every block.

        Text positions past the prompt length must be zero (upstream zeroes them); they are
        attended like any other position, as upstream does.
        """
        c = self.config
        if text_embeds.ndim != 3 or text_embeds.shape[1:] != (c.text_len, c.text_dim):
            raise ValueError(
                f'text embeddings must be (B, {c.text_len}, {c.text_dim}), '
                f'got {tuple(text_embeds.shape)}'
            )
        if clip_tokens.ndim != 3 or clip_tokens.shape[-1] != c.clip_dim:
            raise ValueError(
                f'CLIP tokens must be (B, N, {c.clip_dim}), got {tuple(clip_tokens.shape)}'
            )
        if clip_tokens.shape[0] != text_embeds.shape[0]:
            raise ValueError('text and CLIP batches differ')
        text = self.text_embedding(text_embeds.to(self.dtype))
        image = self.img_emb(clip_tokens.to(self.dtype))
        return CrossAttentionContext(
            [blk.cross_attn.project_context(text, image) for blk in self.blocks]
        )

    def embed_video(self, latents: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        """Patch tokens ``(B, F*h*w, C)`` of ``cat([latents, y])`` and the grid ``(F, h, w)``."""
        x = self.patch_embedding(torch.cat([latents, y.to(latents.dtype)], dim=1))
        grid = tuple(x.shape[2:])
        return x.flatten(2).transpose(1, 2), grid

    def embed_registers(
        self, action: torch.Tensor, timestep_action: torch.Tensor, state: torch.Tensor
    ) -> torch.Tensor:
        """Action then state tokens ``(B, A + S, C)``."""
        return torch.cat(
            [self.action_encoder(action, timestep_action), self.state_encoder(state)], dim=1
        )

    def time_embeddings(self, timesteps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``timesteps (B, S)`` -> embeddings ``e (B, S, C)``, projections ``e0 (B, S, 6, C)``."""
        b, s = timesteps.shape
        feats = sinusoidal_embedding(self.config.freq_dim, timesteps.flatten()).to(self.dtype)
        e = self.time_embedding(feats).unflatten(0, (b, s))
        e0 = self.time_projection(e).unflatten(2, (6, self.config.dim))
        return e, e0

    def run_blocks(
        self,
        x: torch.Tensor,
        modulation: Modulation,
        rotary: Rotary,
        context: CrossAttentionContext,
        backend: SelfAttentionBackend,
    ) -> torch.Tensor:
        """All blocks on tokens ``x`` laid out as ``modulation.frames`` frames then registers."""
        for i, block in enumerate(self.blocks):
            x = block(x, modulation, rotary, context.layers[i], backend.layer(i))
        return x

    def unpatchify(self, x: torch.Tensor, grid: tuple[int, int, int]) -> torch.Tensor:
        """``(B, F*h*w, prod(patch)*out_dim)`` -> ``(B, out_dim, F*pt, h*ph, w*pw)``."""
        b, (f, h, w), (pt, ph, pw) = x.shape[0], grid, self.config.patch_size
        c = self.config.out_dim
        x = x.view(b, f, h, w, pt, ph, pw, c).permute(0, 7, 1, 4, 2, 5, 3, 6)
        return x.reshape(b, c, f * pt, h * ph, w * pw)

    def _check_video(self, latents: torch.Tensor, y: torch.Tensor) -> None:
        c = self.config
        if latents.ndim != 5 or y.ndim != 5:
            raise ValueError('latents and y must be (B, C, F, H, W)')
        if latents.shape[1] + y.shape[1] != c.in_dim:
            raise ValueError(
                f'latent ({latents.shape[1]}) + conditioning ({y.shape[1]}) channels '
                f'!= in_dim {c.in_dim}'
            )
        if latents.shape[0] != y.shape[0] or latents.shape[2:] != y.shape[2:]:
            raise ValueError(f'latents {tuple(latents.shape)} and y {tuple(y.shape)} disagree')
        pt, ph, pw = c.patch_size
        f, h, w = latents.shape[2:]
        if f % pt or h % ph or w % pw:
            raise ValueError(
                f'latent grid {(f, h, w)} is not divisible by the patch {c.patch_size}'
            )
        if (h // ph) * (w // pw) != c.frame_seqlen:
            raise ValueError(
                f'latent {h}x{w} gives {(h // ph) * (w // pw)} tokens per frame, the model expects '
                f'frame_seqlen={c.frame_seqlen}'
            )

    def prefill(
        self,
        latents: torch.Tensor,
        y: torch.Tensor,
        context: CrossAttentionContext,
        cache: KVCache,
        start_frame: int,
    ) -> None:
        """Run clean context frames at ``t = 0`` and commit their keys/values to ``cache``.

        The last block computes its keys and values only: nothing reads its output.
        """
        self._check_video(latents, y)
        x, grid = self.embed_video(latents.to(self.dtype), y)
        frames = grid[0]
        _, e0 = self.time_embeddings(
            torch.zeros(x.shape[0], frames, dtype=torch.int64, device=x.device)
        )
        modulation = Modulation(e0, frames, uniform=True)
        rotary = self.rotary(start_frame, grid, registers=False)
        cache.begin(x.shape[1], 0)
        *body, last = self.blocks
        for i, block in enumerate(body):
            x = block(x, modulation, rotary, context.layers[i], cache.layer(i))
        last.write_keys_values(x, modulation, rotary, cache.layer(len(body)))
        cache.commit()

    def forward(
        self,
        latents: torch.Tensor,
        y: torch.Tensor,
        timestep: torch.Tensor,
        context: CrossAttentionContext,
        cache: KVCache,
        start_frame: int,
        action: torch.Tensor,
        timestep_action: torch.Tensor,
        state: torch.Tensor,
    ) -> DiTOutput:
        """One denoising call over the cached context; the cache is left unchanged.

        Args:
            latents: noisy video latents ``(B, out_dim, F, H, W)``.
            y: conditioning ``(B, in_dim - out_dim, F, H, W)`` (mask + first-frame latents).
            timestep: model timesteps (0..1000), ``(B, F)`` per frame, or ``(B, 1)``: one for
                every frame of a row.
            context: :meth:`prepare_context` of the batch.
            cache: K/V cache holding the clean frames before ``start_frame``.
            start_frame: absolute frame index of the first noisy frame in the window.
            action: noisy normalised actions ``(B, num_action_per_block, action_dim)``.
            timestep_action: ``(B, num_action_per_block)`` per action, or ``(B, 1)``: one for
                every action.  With ``(B, 1)`` timesteps of both kinds the call is
                :attr:`Modulation.uniform`.
            state: normalised, zero-padded state ``(B, num_state_per_block, max_state_dim)``.

        """
        c = self.config
        self._check_video(latents, y)
        num_action, batch, frames = c.num_action_per_block, latents.shape[0], latents.shape[2]
        if action.shape[1:] != (num_action, c.action_dim) or timestep_action.shape not in (
            (batch, num_action),
            (batch, 1),
        ):
            raise ValueError(
                f'action must be (B, {num_action}, {c.action_dim}) with timesteps '
                f'(B, {num_action}) or (B, 1),'
                f' got {tuple(action.shape)} and {tuple(timestep_action.shape)}'
            )
        if timestep.shape not in ((batch, frames), (batch, 1)):
            raise ValueError(
                f'timestep must be (B, {frames}) or (B, 1), got {tuple(timestep.shape)}'
            )
        if state.shape[1:] != (c.num_state_per_block, c.max_state_dim):
            raise ValueError(
                f'state must be (B, {c.num_state_per_block}, {c.max_state_dim}), '
                f'got {tuple(state.shape)}'
            )
        if start_frame < 1:
            raise ValueError('a denoising call needs the first frame prefilled (start_frame >= 1)')
        uniform = timestep.shape[1] == 1 and timestep_action.shape[1] == 1
        timestep = timestep.expand(batch, frames)
        timestep_action = timestep_action.expand(batch, num_action)
        x, grid = self.embed_video(latents.to(self.dtype), y)
        registers = self.embed_registers(
            action.to(self.dtype), timestep_action, state.to(self.dtype)
        )
        stride = num_action // c.num_state_per_block
        timesteps = torch.cat([timestep, timestep_action, timestep_action[:, ::stride]], dim=1)
        e, e0 = self.time_embeddings(timesteps)
        rotary = self.rotary(start_frame, grid, registers=True)
        video_len = x.shape[1]
        cache.begin(video_len, registers.shape[1])
        modulation = Modulation(e0, grid[0], uniform)
        x = self.run_blocks(torch.cat([x, registers], dim=1), modulation, rotary, context, cache)
        action_out = self.action_decoder(x[:, video_len : video_len + num_action])
        video_out = self.head(x[:, :video_len], e[:, :frames], frames)
        return DiTOutput(self.unpatchify(video_out, grid), action_out)
