# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Per-chunk DreamZero inference: prefill clean context, then denoise video latents and actions.

This is the DiT part of upstream ``WANPolicyHead.lazy_joint_video_action``; the caller (the
engine pipeline) does the encoders, normalisation and session policy.

Context windows
    A session runs in context windows of ``local_attn_size`` latent frames (9 for DROID).  A window
    starts (``ChunkInputs.new_window=True``) on the first call of a session, on reset, on a prompt
    change, and when :attr:`DenoiseSession.window_full` says the previous window is used up
    (upstream: ``current_start_frame >= local_attn_size``, every ``max_chunk_size`` = 4 chunks).
    The new window's first call gives the conditioning frame: ``context_latents`` of one latent
    frame (the VAE latent of that image), the CLIP tokens of it and ``y``, the I2V conditioning
    latents of the whole window (4 mask channels then 16 latent channels, ``F_window`` frames,
    upstream ``encode_image``).  Later calls give the latents of the newly observed frames; the
    last ``num_frame_per_block`` of them are used.

One call (:meth:`ChunkDenoiser.denoise_chunk`), with ``nf = num_frame_per_block``:
    1. If a new window: reset the K/V cache, prefill the conditioning frame at frame 0 (t = 0,
       ``y[:, :, 0:1]``), ``start_frame = 1``.  Otherwise prefill the last ``nf`` context latents
       at frames ``[start_frame - nf, start_frame)`` with the matching ``y`` frames.  Only these
       clean frames' keys/values enter the cache, for each CFG branch with its own prompt.
    2. Denoise ``nf`` frames of video noise and ``A`` actions of noise (both ``torch.randn`` from a
       generator seeded with ``seed`` on the compute device, a fresh generator per tensor, as
       upstream) over ``num_inference_steps`` flow-UniPC steps (shift 5), one scheduler for video
       and one for actions.  On the steps chosen by the step cache the DiT runs both CFG branches
       (conditional: prompt; unconditional: negative prompt) on the same noisy inputs; the video
       velocity is ``uncond + cfg_scale * (cond - uncond)``, the action velocity is the
       conditional one.  Skipped steps reuse the last velocities.  When the caller does not want
       the video (``need_video=False``), the last DiT call runs the conditional branch only and
       the video stops there (its unconditional prediction would feed nothing but the video).
    3. ``start_frame += nf``.

With ``cfg_scale == 1`` only the conditional branch runs.  By default both branches run as one
batch (rows ``[cond..., uncond...]``); the worker ranks (:mod:`.workers`) run one branch per
process instead, with the same results.

Usage::

    denoiser = ChunkDenoiser(dit, Sampling(), EngineOptions())
    session = denoiser.open_session()
    out = denoiser.denoise_chunk(session, ChunkInputs(
        prompt_embeds=text,                   # (B, 512, 4096), zero past the prompt
        negative_prompt_embeds=negative_text,  # same shape
        context_latents=first_frame_latent,    # (B, 16, 1, 44, 80)
        state=normalised_state,                # (B, 64), zero-padded
        new_window=True,
        clip_tokens=clip,                      # (B, 257, 1280)
        y=y))                                  # (B, 20, 9, 44, 80)
    out.actions        # (B, 24, 32) normalised actions (relative joints + gripper, zero-padded)
    out.video_latents  # (B, 16, 2, 44, 80) predicted clean latents of the next 2 latent frames
    ...
    denoiser.close_session(session)

All tensors may be on any device/dtype; they are moved to the DiT's.  Sessions are independent
(each holds its caches); one denoiser runs one chunk at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import itertools
import time

import torch

from dreamzero_ros.engine.config import Sampling
from dreamzero_ros.engine.networks.attention import attention_kernel
from dreamzero_ros.engine.networks.dit import CausalWanDiT, CrossAttentionContext, DiTOutput
from dreamzero_ros.engine.networks.kv_cache import KVCache
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.engine.pipeline.scheduler import FlowUniPCScheduler, sample_noise
from dreamzero_ros.engine.speed.acceleration import prepare_blocks
from dreamzero_ros.engine.step_cache import StepSchedule

__all__ = [
    'BranchLayout',
    'ChunkDenoiser',
    'ChunkInputs',
    'ChunkOutput',
    'DenoiseSession',
]


@dataclass
class ChunkInputs:
    """Encoder outputs for one chunk; see the module docstring for when each is needed.

    Attributes:
        prompt_embeds: umT5 embeddings of the prompt ``(B, text_len, text_dim)``, zero past the
            prompt's tokens.
        negative_prompt_embeds: the same for the negative prompt; required when CFG is on.
        context_latents: clean VAE latents ``(B, 16, T, h, w)``; ``T = 1`` on a new window,
            ``T >= num_frame_per_block`` otherwise (the last ones are used).
        state: normalised state, zero-padded to ``max_state_dim``: ``(B, D)`` or ``(B, S, D)``.
        new_window: start a new context window with this call.
        clip_tokens: CLIP tokens of the conditioning frame ``(B, 257, clip_dim)``; new window only.
        y: I2V conditioning latents of the window ``(B, 20, F_window, h, w)``; new window only.
        need_video: whether the caller wants the predicted video latents.  Without them the
            last DiT call, where the step cache knows it in advance, runs the conditional branch
            only: CFG changes the video velocity only, the actions follow the conditional one,
            and nothing later reads the predicted video (the next chunk's context comes from
            observed frames).

    """

    prompt_embeds: torch.Tensor
    negative_prompt_embeds: torch.Tensor | None
    context_latents: torch.Tensor
    state: torch.Tensor
    new_window: bool = False
    clip_tokens: torch.Tensor | None = None
    y: torch.Tensor | None = None
    need_video: bool = True


@dataclass
class ChunkOutput:
    """Result of one chunk.

    Attributes:
        video_latents: predicted clean latents ``(B, 16, num_frame_per_block, h, w)`` of the frames
            ``[start_frame, start_frame + num_frame_per_block)`` (upstream prepends the
            conditioning latent on a window's first chunk; the caller has it); None when the
            inputs did not ask for them (``need_video=False``).
        actions: denoised normalised actions ``(B, num_action_per_block, action_dim)``.
        start_frame: window frame index of the first predicted frame.
        dit_calls: denoising DiT calls made (prefill not counted), including a last one that ran
            the conditional branch only; a process that holds no conditional row skips that one.
        timings_ms: ``context`` (cross-attention projection), ``prefill``, ``denoise``.
        step_similarities: velocity cosine similarities the dynamic step cache compared.
        conditional_only_calls: how many of ``dit_calls`` ran the conditional branch only (0 or
            1: the last call when the video was not asked for).

    """

    video_latents: torch.Tensor | None
    actions: torch.Tensor
    start_frame: int
    dit_calls: int
    timings_ms: dict[str, float]
    step_similarities: list[float] = field(default_factory=list)
    conditional_only_calls: int = 0


_session_ids = itertools.count(1)


@dataclass
class DenoiseSession:
    """DiT-side state of one session: window position, K/V cache, projected cross-attention."""

    session_id: int
    local_attn_size: int
    start_frame: int = 0
    cache: KVCache | None = None
    context: CrossAttentionContext | None = None
    y: torch.Tensor | None = None
    clip_tokens: torch.Tensor | None = None
    prompt_refs: tuple[torch.Tensor | None, ...] = ()

    @property
    def window_full(self) -> bool:
        """The next call must start a new window (upstream ``start_frame >= local_attn_size``).

        With ``max_chunk_size = -1`` (``local_attn_size = -1``) that is always true, as upstream.
        """
        return self.start_frame >= self.local_attn_size

    @property
    def needs_new_window(self) -> bool:
        """No window yet, or the current one is used up."""
        return self.start_frame == 0 or self.window_full

    def release(self) -> None:
        """Free the device memory held by the session."""
        self.cache = None
        self.context = None
        self.y = None
        self.clip_tokens = None
        self.prompt_refs = ()
        self.start_frame = 0


class BranchLayout:
    """Which CFG branches this process computes, and how it gets the velocities of all of them.

    The default computes every branch in one batch.  Rows of a DiT call are
    ``[branch 0 x B, branch 1 x B, ...]`` over :attr:`local_branches`.  Subclasses (see
    :mod:`.workers.driver`) split the branches over processes; the hooks let
    them keep other processes in step with the denoiser that uses the layout.
    """

    def __init__(self, use_cfg: bool = True) -> None:
        self.branches: tuple[str, ...] = ('cond', 'uncond') if use_cfg else ('cond',)
        #: Tensor-parallel ranks each branch's DiT is split over; a DiT built for this layout
        #: is rank 0's shard (the multi-process driver sets it; 1: whole).
        self.tp_size = 1

    @property
    def local_branches(self) -> tuple[str, ...]:
        """Branches computed in this process."""
        return self.branches

    def attach(self, denoiser: ChunkDenoiser) -> None:
        """Called once by the denoiser that uses this layout, first thing at its construction.

        A layout may still set :attr:`branches` here (it then knows the sampling config).
        """

    def before_chunk(self, session: DenoiseSession, inputs: ChunkInputs) -> None:
        """Called for each chunk after its inputs are validated, before anything runs."""

    def on_close(self, session: DenoiseSession) -> None:
        """Called when a session is closed."""

    def combine(
        self, video: torch.Tensor, action: torch.Tensor, batch: int
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """``(video_cond, video_uncond or None, action_cond)`` from this process's DiT output."""
        if len(self.branches) == 1:
            return video, None, action
        return video[:batch], video[batch:], action[:batch]


def _check_shape(name: str, tensor: torch.Tensor | None, expected: tuple[int | None, ...]) -> None:
    """Raise ``ValueError`` unless ``tensor`` exists and matches ``expected`` (None: any size)."""
    if tensor is None:
        raise ValueError(f'{name} is required')
    if tensor.ndim != len(expected) or any(
        e is not None and n != e for n, e in zip(tensor.shape, expected, strict=True)
    ):
        shown = tuple('*' if e is None else e for e in expected)
        raise ValueError(f'{name} must have shape {shown}, got {tuple(tensor.shape)}')


def _sync(device: torch.device) -> None:
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def _window_frames(y: torch.Tensor, start: int, count: int) -> torch.Tensor:
    """Upstream's ``ys`` slice: frames ``[start, start + count)`` or, past the end, the last."""
    if start + count <= y.shape[2]:
        return y[:, :, start : start + count]
    return y[:, :, -count:]


class ChunkDenoiser:
    """Runs DiT chunks with CFG and the step cache, for any number of sessions.

    ``sampling`` says how a chunk is sampled (default: upstream's); of ``options`` (default: the
    reference path), the speed options, ``kv_cache`` and ``step_cache`` apply (the blocks
    compile with ``compile_backend``).
    """

    def __init__(
        self,
        dit: CausalWanDiT,
        sampling: Sampling | None = None,
        options: EngineOptions | None = None,
        layout: BranchLayout | None = None,
        compile_backend: str = 'inductor',
    ) -> None:
        sampling = sampling or Sampling()
        options = options or EngineOptions()
        sampling.step_cache_tuning.check(options.step_cache, sampling.num_inference_steps)
        self.dit = dit
        self.sampling = sampling
        self.options = options
        self.compile_backend = compile_backend
        self.layout = layout or BranchLayout(sampling.use_cfg)
        self.layout.attach(self)
        if len(self.layout.branches) != sampling.cfg_rows:
            raise ValueError(
                f'layout branches {self.layout.branches} do not fit cfg_scale {sampling.cfg_scale}'
            )
        self._schedulers = [
            FlowUniPCScheduler(sampling.num_train_timesteps, sampling.shift) for _ in range(2)
        ]
        #: How the DiT's blocks run for this denoiser (installed before every chunk).
        self.block_runs = prepare_blocks(dit, options, compile_backend)

    def open_session(self, session_id: int | None = None) -> DenoiseSession:
        """A new session (no window yet)."""
        sid = next(_session_ids) if session_id is None else session_id
        return DenoiseSession(sid, self.dit.config.local_attn_size)

    def close_session(self, session: DenoiseSession) -> None:
        """Release a session's memory (and that of the other ranks' copies, if any)."""
        self.layout.on_close(session)
        session.release()

    def validate(self, session: DenoiseSession, inputs: ChunkInputs) -> None:
        """Raise ``ValueError`` if ``inputs`` cannot run on ``session`` (nothing is changed)."""
        c = self.dit.config
        lat = inputs.context_latents
        _check_shape('context_latents', lat, (None, c.out_dim, None, None, None))
        batch, frames, h, w = lat.shape[0], lat.shape[2], lat.shape[3], lat.shape[4]
        _, ph, pw = c.patch_size
        if h % ph or w % pw or (h // ph) * (w // pw) != c.frame_seqlen:
            raise ValueError(
                f'latents of {h}x{w} do not give frame_seqlen={c.frame_seqlen} tokens per frame'
            )
        _check_shape('prompt_embeds', inputs.prompt_embeds, (batch, c.text_len, c.text_dim))
        if self.sampling.use_cfg:
            _check_shape(
                'negative_prompt_embeds',
                inputs.negative_prompt_embeds,
                (batch, c.text_len, c.text_dim),
            )
        state = inputs.state
        if state.ndim == 2 and c.num_state_per_block == 1:
            _check_shape('state', state, (batch, c.max_state_dim))
        else:
            _check_shape('state', state, (batch, c.num_state_per_block, c.max_state_dim))
        if not torch.isfinite(state).all():
            raise ValueError('state contains NaN or infinite values')
        if inputs.new_window:
            if frames != 1:
                raise ValueError(f'a new window starts from 1 context latent frame, got {frames}')
            _check_shape('clip_tokens', inputs.clip_tokens, (batch, None, c.clip_dim))
            _check_shape('y', inputs.y, (batch, c.in_dim - c.out_dim, None, h, w))
            if inputs.y.shape[2] < c.num_frame_per_block:
                raise ValueError(f'y must cover >= {c.num_frame_per_block} window frames')
            return
        if session.needs_new_window:
            raise ValueError('the session needs a new window (new_window=True, clip_tokens, y)')
        if frames < c.num_frame_per_block:
            raise ValueError(f'need >= {c.num_frame_per_block} context latent frames, got {frames}')
        if session.cache.batch != batch * len(self.layout.local_branches):
            raise ValueError('the batch size changed within a window')
        if session.y.shape[3:] != (h, w):
            raise ValueError(f"latent size {h}x{w} differs from the window's")

    def _context(self, session: DenoiseSession, inputs: ChunkInputs) -> bool:
        """(Re)project the cross-attention context if the window or the prompts changed."""
        prompts = {'cond': inputs.prompt_embeds, 'uncond': inputs.negative_prompt_embeds}
        refs = tuple(prompts[b] for b in self.layout.local_branches)
        if (
            not inputs.new_window
            and session.context is not None
            and len(refs) == len(session.prompt_refs)
            and all(a is b for a, b in zip(refs, session.prompt_refs, strict=True))
        ):
            return False
        parts = [self.dit.prepare_context(p.to(self.dit.device), session.clip_tokens) for p in refs]
        session.context = parts[0] if len(parts) == 1 else CrossAttentionContext.cat(parts)
        session.prompt_refs = refs
        return True

    @torch.no_grad()
    def denoise_chunk(self, session: DenoiseSession, inputs: ChunkInputs) -> ChunkOutput:
        """Prefill and denoise one chunk; see the module docstring."""
        self.validate(session, inputs)
        self.layout.before_chunk(session, inputs)
        try:
            self.block_runs.install(self.dit)
            with attention_kernel(self.options.attention_backend):
                return self._run(session, inputs)
        except BaseException:
            session.start_frame = 0  # the cache may be half-updated: the next call needs a window
            raise

    def _rows(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` on the DiT's device and dtype, repeated for each local CFG branch."""
        tensor = tensor.to(device=self.dit.device, dtype=self.dit.dtype)
        reps = len(self.layout.local_branches)
        return tensor if reps == 1 else torch.cat([tensor] * reps, dim=0)

    def _open(self, session: DenoiseSession, inputs: ChunkInputs) -> None:
        """Start a new window if asked; (re)project the cross-attention context if needed."""
        if inputs.new_window:
            device, dtype = self.dit.device, self.dit.dtype
            session.start_frame = 0
            session.y = inputs.y.to(device=device, dtype=dtype)
            session.clip_tokens = inputs.clip_tokens.to(device=device, dtype=dtype)
            rows = inputs.context_latents.shape[0] * len(self.layout.local_branches)
            if session.cache is None or session.cache.batch != rows:
                session.cache = self.dit.new_cache(rows, self.options.kv_cache)
            session.cache.reset()
        self._context(session, inputs)

    def _prefill(self, session: DenoiseSession, latents: torch.Tensor) -> None:
        """Commit the clean frames' keys/values: the conditioning frame, or the newest ones."""
        nf = self.dit.config.num_frame_per_block
        if session.start_frame == 0:
            clean, frame, y = latents[:, :, :1], 0, session.y[:, :, :1]
        else:  # the frames just before the ones to predict
            frame = session.start_frame - nf
            clean, y = latents[:, :, -nf:], _window_frames(session.y, frame, nf)
        self.dit.prefill(self._rows(clean), self._rows(y), session.context, session.cache, frame)
        if session.start_frame == 0:
            session.start_frame = 1

    def _dit_call(
        self,
        session: DenoiseSession,
        video: torch.Tensor,
        action: torch.Tensor,
        y: torch.Tensor,
        state: torch.Tensor,
        t_video: torch.Tensor,
        t_action: torch.Tensor,
        conditional_only: bool = False,
    ) -> DiTOutput:
        """One denoising DiT call on the noisy ``video`` and ``action`` (one row per sample).

        It runs every local CFG branch (``y`` and ``state`` hold their rows), or with
        ``conditional_only`` the conditional rows alone (they come first).  Each row has one
        timestep per token kind: a uniform call (:class:`~.dit_block.Modulation`).
        """
        batch = video.shape[0]
        if conditional_only:
            context, cache = session.context.rows(batch), session.cache.rows(batch)
            y, state = y[:batch], state[:batch]
        else:
            context, cache = session.context, session.cache
            video, action = self._rows(video), self._rows(action)
        rows = video.shape[0]
        return self.dit(
            video,
            y,
            t_video.expand(rows, 1),
            context,
            cache,
            session.start_frame,
            action,
            t_action.expand(rows, 1),
            state,
        )

    def _run(self, session: DenoiseSession, inputs: ChunkInputs) -> ChunkOutput:
        dit, c, cfg = self.dit, self.dit.config, self.sampling
        device, dtype = dit.device, dit.dtype
        nf = c.num_frame_per_block
        batch = inputs.context_latents.shape[0]
        timings: dict[str, float] = {}
        start = time.perf_counter()
        self._open(session, inputs)
        _sync(device)
        timings['context'] = (time.perf_counter() - start) * 1e3

        start = time.perf_counter()
        self._prefill(session, inputs.context_latents)
        _sync(device)
        timings['prefill'] = (time.perf_counter() - start) * 1e3

        start = time.perf_counter()
        h, w = inputs.context_latents.shape[3:]
        video = sample_noise(
            (batch, c.out_dim, nf, h, w), torch.Generator(device).manual_seed(cfg.seed), dtype
        )
        action = sample_noise(
            (batch, c.num_action_per_block, c.action_dim),
            torch.Generator(device).manual_seed(cfg.seed),
            dtype,
        )
        state = self._rows(inputs.state if inputs.state.ndim == 3 else inputs.state[:, None])
        y = self._rows(_window_frames(session.y, session.start_frame, nf))
        video_sched, action_sched = self._schedulers
        for scheduler in self._schedulers:
            if scheduler.timesteps.device != device or not len(scheduler.timesteps):
                scheduler.set_timesteps(cfg.num_inference_steps, device)
            scheduler.reset()
        schedule = StepSchedule(
            self.options.step_cache, cfg.step_cache_tuning, cfg.num_inference_steps
        )
        skip_uncond = cfg.use_cfg and not inputs.need_video
        dit_calls = conditional_calls = 0
        flow = action_flow = None
        video_done = False
        for i in range(cfg.num_inference_steps):
            t_video = video_sched.timesteps[i]
            t_action = action_sched.timesteps[i]
            run = schedule.should_run(i)
            noisy = (session, video, action, y, state, t_video, t_action)
            if run and skip_uncond and schedule.is_last_dit_step(i):
                # Only the video would use the unconditional prediction: stop the video here.
                video_done = True
                if 'cond' in self.layout.local_branches:
                    action_flow = self._dit_call(*noisy, conditional_only=True).action
                    dit_calls += 1
                    conditional_calls += 1
            elif run:
                out = self._dit_call(*noisy)
                dit_calls += 1
                v_cond, v_uncond, action_flow = self.layout.combine(out.video, out.action, batch)
                flow = (
                    v_cond if v_uncond is None else v_uncond + cfg.cfg_scale * (v_cond - v_uncond)
                )
                schedule.record(flow)
            if not video_done:
                video = video_sched.step(flow, t_video, video)
            action = action_sched.step(action_flow, t_action, action)
        _sync(device)
        timings['denoise'] = (time.perf_counter() - start) * 1e3
        first = session.start_frame
        session.start_frame += nf
        video_out = video if inputs.need_video else None
        return ChunkOutput(
            video_out, action, first, dit_calls, timings, schedule.similarities, conditional_calls
        )
