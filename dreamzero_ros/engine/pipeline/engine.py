# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The DreamZero engine: observations of the checkpoint's robot in, absolute action chunks out.

One :meth:`DreamZeroEngine.infer` call is upstream's ``lazy_joint_video_action`` plus the
evaluation transforms around it (``GrootSimPolicy.lazy_joint_forward_causal`` and the OpenPI
server wrapper):

1. **inputs** -- the views of the session's recent frames (1 on the first call, then 4) are
   cropped, resized and stitched as the embodiment says (:mod:`.model_inputs`; on the engine's
   GPU, the host only uploads the uint8 frames); the state is normalised (:mod:`.normalization`);
   the prompt is put into the embodiment's template.
2. **encode** -- umT5 embeddings of the prompt and of the negative prompt (cached per text).
   On a new context window (first call, prompt change, single-frame input, window used up):
   CLIP tokens of the conditioning frame (the last frame of a 4-frame input, else the first) and
   the I2V conditioning ``y`` (VAE latents of that frame followed by ``num_frames - 1`` blank
   frames, with a 4-channel first-frame mask).  Otherwise the VAE latents of the new frames,
   each repeated ``num_frame_per_block`` times after the first, as upstream feeds them.
3. **prefill / denoise** -- :class:`~.denoise.ChunkDenoiser`: clean context into the K/V caches
   of both CFG branches, then 16 UniPC steps over video latents and actions.
4. **decode** -- de-normalised actions, relative keys made absolute by adding the current state;
   on request, the predicted video latents decoded to frames.

The embodiment (cameras, state and action keys, statistics, prompt template) comes from the
checkpoint's ``experiment_cfg/`` or an embodiment file (:mod:`.experiment_cfg`); the weights are
loaded by :mod:`.weights` (LoRA adapters merged, a LoRA-only checkpoint on its base).

The engine is thread-safe: one inference at a time.  Sessions are isolated and bounded
(:mod:`.session`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
import contextlib
from pathlib import Path
import tempfile
import threading
import time
from typing import Any

import numpy as np
import torch

from dreamzero_ros.engine.checkpoint.experiment_cfg import embodiment_from_checkpoint
from dreamzero_ros.engine.checkpoint.layout import CONFIG_FILE
from dreamzero_ros.engine.checkpoint.synthetic_droid import droid_embodiment_for
from dreamzero_ros.engine.checkpoint.tokenizer import (
    TOKENIZER_FILE,
    UMT5Tokenizer,
    clean_prompt,
    train_tiny_tokenizer,
)
from dreamzero_ros.engine.checkpoint.upstream_config import read_config
from dreamzero_ros.engine.checkpoint.weights import load_checkpoint
from dreamzero_ros.engine.config import EngineConfig
from dreamzero_ros.engine.embodiment import Embodiment
from dreamzero_ros.engine.memory.estimate import (
    check_memory,
    device_budget,
    estimate_memory,
    session_memory,
)
from dreamzero_ros.engine.memory.offload import streamed_device
from dreamzero_ros.engine.memory.placement import EngineModules, build_modules
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.engine.pipeline.denoise import BranchLayout, ChunkDenoiser, ChunkInputs
from dreamzero_ros.engine.pipeline.model_inputs import (
    prepare_views,
    to_model_video,
    validate_observation,
)
from dreamzero_ros.engine.pipeline.normalization import StateActionNormalizer
from dreamzero_ros.engine.pipeline.predicted_video import ChunkViews
from dreamzero_ros.engine.pipeline.session import Session, SessionStore
from dreamzero_ros.engine.speed.acceleration import VAEEncoding
from dreamzero_ros.engine.speed.compile_cache import use_compile_cache
from dreamzero_ros.errors import CheckpointError, PolicyError
from dreamzero_ros.policy_types import ActionChunk, Observation

__all__ = ['DreamZeroEngine']

#: Mask channels in front of the VAE latents of the I2V conditioning ``y``.
_MASK_CHANNELS = 4


def _sync(device: torch.device) -> None:
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


class DreamZeroEngine:
    """DreamZero inference behind the :class:`~dreamzero_ros.policy_types.Policy` protocol.

    Build it with :meth:`from_pretrained` (a checkpoint folder) or :meth:`from_config` (random
    weights, for tests and benchmarks).

    Args:
        config: shapes and settings.
        modules: the networks, on ``config.device`` in ``config.dtype``.
        tokenizer: prompt tokenizer.
        embodiment: the robot's cameras, state, actions and prompt template (it must fit
            the model: :meth:`.EngineConfig.check_embodiment`).
        layout: CFG branch layout (default: both branches batched in this process).

    """

    def __init__(
        self,
        config: EngineConfig,
        modules: EngineModules,
        tokenizer: UMT5Tokenizer,
        embodiment: Embodiment,
        layout: BranchLayout | None = None,
    ) -> None:
        config.check_embodiment(embodiment)
        self.config = config
        self.modules = modules
        self.tokenizer = tokenizer
        self.embodiment = embodiment
        self.normalizer = StateActionNormalizer(
            embodiment, config.max_state_dim, config.max_action_dim
        )
        self.device = torch.device(config.device)
        options = config.options
        #: The folder of the persistent compile cache (None unless ``compile`` uses inductor,
        #: or with ``compile_cache: off``), set before anything compiles.
        self.compile_cache = None
        if options.compile and config.compile_backend == 'inductor':
            self.compile_cache = use_compile_cache(options.compile_cache)
        self.denoiser = ChunkDenoiser(
            modules.dit, config.sampling, options, layout, config.compile_backend
        )
        #: How the VAE encoder runs (compiled norms and ``channels_last_3d`` with ``compile`` on
        #: CUDA, where cuDNN also picks its fastest VAE and patch convolutions once).
        self.vae_encoding = VAEEncoding.for_engine(options, self.device, config.compile_backend)
        if self.vae_encoding.compile_backend is not None:
            torch.backends.cudnn.benchmark = True
        self.sessions = SessionStore(
            config.max_sessions,
            self.denoiser.open_session,
            self.denoiser.close_session,
            embodiment.camera_keys,
        )
        self._prompts: OrderedDict[str, torch.Tensor] = OrderedDict()
        self._negative: torch.Tensor | None = None
        self._lock = threading.Lock()
        #: Facts about the last chunk: ``dit_calls``, ``start_frame`` (window frame of its first
        #: predicted latent), ``new_window``, ``frames`` (frames per view it was given),
        #: ``step_similarities`` (what the dynamic step cache compared) and
        #: ``conditional_only_calls`` (DiT calls that skipped the unconditional branch).
        self.last_stats: dict[str, Any] = {}

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_pretrained(
        cls,
        folder: str | Path,
        options: EngineOptions | None = None,
        layout: BranchLayout | None = None,
        tokenizer_file: str | Path | None = None,
        **changes: Any,
    ) -> DreamZeroEngine:
        """Load a checkpoint folder (see :mod:`.checkpoint` for the layout) with ``options``.

        Before anything is allocated, the configuration's memory need
        (:func:`.estimate.estimate_memory`) is checked against the device's free memory
        (CUDA) or ``options.memory_budget_gib``: a configuration that cannot fit is refused with
        :class:`~dreamzero_ros.errors.DeviceMemoryError`.

        Args:
            folder: checkpoint folder (a full checkpoint, or a LoRA-only one with
                ``options.base_checkpoint``).
            options: the engine options, whole (default: :class:`EngineOptions`'); of them the
                checkpoint's base, the encoder folder and the embodiment (tag, file, prompt
                template) choose what is read.
            layout: CFG branch layout (the worker ranks' driver, :mod:`.workers.driver`; with
                tensor parallel the DiT is built and loaded as rank 0's shard only).
            tokenizer_file: the umT5 sentencepiece model, if not ``tokenizer/spiece.model`` of
                the checkpoint (or of its base); the published checkpoint does not ship it: take
                ``spiece.model`` of ``google/umt5-xxl``.
            changes: other :class:`EngineConfig` fields (sampling, sessions, ...).

        """
        folder = Path(folder)
        options = (options or EngineOptions()).resolved()
        base = options.base_checkpoint or None
        _require_checkpoint_folder(folder)
        tokenizer_path = _tokenizer_path(folder, base, tokenizer_file)
        embodiment = embodiment_from_checkpoint(
            folder,
            options.embodiment_tag or None,
            options.embodiment_file or None,
            options.prompt_template or None,
        )
        config = read_config(folder, options, **changes)
        config.check_embodiment(embodiment)
        rows, tp_size = _layout_shape(layout, config)
        budget = options.memory_budget
        check_memory(
            estimate_memory(config, rows, tp_size),
            device_budget(config.device) if budget is None else budget,
            config.device,
        )
        tokenizer = UMT5Tokenizer(tokenizer_path, config.umt5.text_len)
        modules = build_modules(config, tp_size=tp_size)
        load_checkpoint(
            folder, modules.as_dict(), base=base, encoder_dir=options.encoder_dir or None
        )
        return cls(config, modules, tokenizer, embodiment, layout)

    @classmethod
    def from_config(
        cls,
        config: EngineConfig,
        seed: int = 0,
        embodiment: Embodiment | None = None,
        layout: BranchLayout | None = None,
    ) -> DreamZeroEngine:
        """An engine with seeded random weights, a tiny trained tokenizer and ``embodiment``.

        ``embodiment`` defaults to DROID with plausible statistics at the view size of the
        preset (:func:`.synthetic_droid.droid_embodiment_for`).  With a tensor-parallel
        ``layout`` the DiT is rank 0's shard of the same random model.
        """
        if embodiment is None:
            embodiment = droid_embodiment_for(config.dit.frame_seqlen)
        with tempfile.TemporaryDirectory() as folder:
            train_tiny_tokenizer(folder)
            tokenizer = UMT5Tokenizer.from_folder(folder, config.umt5.text_len)
        tp_size = 1 if layout is None else layout.tp_size
        modules = build_modules(config, seed, tp_size=tp_size)
        return cls(config, modules, tokenizer, embodiment, layout)

    # ------------------------------------------------------------------ sessions
    @property
    def max_sessions(self) -> int:
        """Sessions kept at once; beyond that the least recently used one is dropped."""
        return self.sessions.max_sessions

    def session_memory_bytes(self) -> int:
        """Device memory one session holds once it has run, bytes.

        Its self-attention K/V cache (in the precision of ``options.kv_cache``) and projected
        cross-attention keys/values, for the CFG branches on this device.
        """
        dit = self.modules.dit
        rows = len(self.denoiser.layout.local_branches)
        tp_size = dit.config.num_heads // dit.blocks[0].self_attn.num_heads
        return sum(session_memory(self.config, rows, tp_size))

    # ------------------------------------------------------------------ Policy
    @property
    def metadata(self) -> dict[str, Any]:
        """What clients need to know (the OpenPI server sends this first).

        DROID's keys (``image_resolution``: the first camera's, ``n_external_cameras``: the
        cameras whose key does not name a wrist, ...) and the embodiment: its cameras in the
        model's order with their resolutions ``[height, width]``, the state keys with their
        widths and which are grippers, the action keys, the arm and gripper widths of an
        observation and the gripper columns of an action row.
        """
        e = self.embodiment
        wrist = [key for key in e.camera_keys if 'wrist' in key]
        return {
            'image_resolution': tuple(e.cameras[0].source_size),
            'n_external_cameras': len(e.cameras) - len(wrist),
            'needs_wrist_camera': bool(wrist),
            'needs_stereo_camera': False,
            'needs_session_id': True,
            'action_space': 'joint_position',
            'action_horizon': self.config.action_horizon,
            'action_dim': e.action_dim,
            'control_hz': e.control_hz,
            'embodiment': e.tag,
            'cameras': list(e.camera_keys),
            'camera_resolutions': [list(c.source_size) for c in e.cameras],
            'state_keys': [key.key for key in e.state],
            'state_dims': [key.dim for key in e.state],
            'gripper_state_keys': [key.key for key in e.state if key.gripper],
            'action_keys': [key.key for key in e.action],
            'action_dims': [key.dim for key in e.action],
            'arm_dof': e.arm_state_dim,
            'gripper_dof': e.gripper_state_dim,
            'gripper_columns': list(e.gripper_columns),
            'velocity_columns': list(e.velocity_columns),
        }

    def reset(self, session_id: str = 'default') -> None:
        """Forget a session: frame history, K/V caches, prompt, chunk counter."""
        with self._lock:
            self.sessions.reset(session_id)

    def close(self) -> None:
        """Drop every session and stop CFG-parallel workers, if the layout has any."""
        with self._lock:
            self.sessions.clear()
            shutdown = getattr(self.denoiser.layout, 'shutdown', None)
            if shutdown is not None:
                shutdown()

    def infer(
        self,
        observation: Observation,
        return_video: bool = False,
        *,
        predicted_video: bool = False,
        model_input: bool = False,
    ) -> ActionChunk:
        """Predict the next action chunk of ``observation.session_id``.

        Args:
            observation: the newest observation (an image per camera of the embodiment).
            return_video: also decode the predicted future frames (slow).
            predicted_video: keep the predicted video latents in ``chunk.views``
                (:class:`.predicted_video.ChunkViews`), undecoded: the caller decodes them
                later, off its command path.
            model_input: keep the stitched frame the model was given in ``chunk.views``.

        Raises:
            ObservationError: malformed observation; the session is left untouched.
            PolicyError: inference failed; the session is reset.

        """
        validate_observation(observation, self.embodiment)
        state = self.embodiment.state_vector(
            observation.joint_position, observation.gripper_position
        )
        normalized_state = self.normalizer.normalize_state(state)
        with self._lock:
            session = self.sessions.get(observation.session_id)
            session.history.append(observation.images)
            try:
                keep = (predicted_video, model_input)
                return self._infer(
                    session, observation, state, normalized_state, return_video, keep
                )
            except PolicyError:
                self.sessions.reset(session.session_id)
                raise
            except (RuntimeError, ValueError) as error:
                self.sessions.reset(session.session_id)
                raise PolicyError(f'inference failed: {error}') from error

    # ------------------------------------------------------------------ stages
    @contextlib.contextmanager
    def _timed(self, timings: dict[str, float], name: str) -> Iterator[None]:
        """Add the elapsed milliseconds of the block (device-synchronised) to ``timings[name]``."""
        _sync(self.device)
        start = time.perf_counter()
        yield
        _sync(self.device)
        timings[name] = timings.get(name, 0.0) + (time.perf_counter() - start) * 1e3

    def _encode_text(self, text: str) -> torch.Tensor:
        """umT5 embeddings on the engine's device, computed where the encoder runs.

        On the device; on the host when ``options.text_encoder`` is ``cpu``; on the device with
        the weights streamed from the host when it is ``offload``.
        """
        ids, mask = self.tokenizer(text)
        encoder = self.modules.text_encoder
        where = streamed_device(encoder) or encoder.token_embedding.weight.device
        return encoder.encode(ids.to(where), mask.to(where)).to(self.device)

    def encode_prompt(self, text: str) -> torch.Tensor:
        """umT5 embeddings ``(1, text_len, dim)`` of ``text`` (already templated), LRU-cached."""
        cached = self._prompts.get(text)
        if cached is not None:
            self._prompts.move_to_end(text)
            return cached
        embeds = self._encode_text(text)
        self._prompts[text] = embeds
        if len(self._prompts) > self.config.max_cached_prompts:
            self._prompts.popitem(last=False)
        return embeds

    def negative_prompt_embeds(self) -> torch.Tensor:
        """umT5 embeddings of the negative prompt (computed once)."""
        if self._negative is None:
            self._negative = self._encode_text(self.config.sampling.negative_prompt)
        return self._negative

    def _video(self, session: Session) -> tuple[torch.Tensor, torch.Tensor]:
        """Model video ``(1, 3, T, H, W)`` of the session's last frames, and the stitched uint8.

        The views are cropped, resized and stitched on the engine's device (the host uploads the
        uint8 frames only); a GPU may round a resized pixel to the neighbouring uint8 value.
        """
        frames = session.history.select(session.frames_per_call)
        stitched = prepare_views(frames, self.embodiment, self.device)
        return to_model_video(stitched, self.device, self.config.torch_dtype), stitched

    def _window_conditioning(
        self, video: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """CLIP tokens, I2V conditioning ``y`` and first-frame latent of a new window."""
        frames = video.shape[2]
        image = video[:, :, -1:] if frames in (4, 9) else video[:, :, :1]
        clip_tokens = self.modules.image_encoder(image[:, :, 0])
        blank = image.new_zeros((*image.shape[:2], self.config.num_frames - 1, *image.shape[3:]))
        latents = self.vae_encoding.encode(self.modules.vae, torch.cat([image, blank], dim=2))
        mask = torch.zeros(
            (latents.shape[0], _MASK_CHANNELS, *latents.shape[2:]),
            dtype=latents.dtype,
            device=latents.device,
        )
        mask[:, :, 0] = 1
        return clip_tokens, torch.cat([mask, latents], dim=1), latents[:, :, :1]

    def _context_latents(self, video: torch.Tensor) -> torch.Tensor:
        """VAE latents of the new frames of a continuing window (upstream's frame repetition)."""
        per_block = self.config.dit.num_frame_per_block
        groups = video.shape[2] // 4
        if groups != per_block:
            video = torch.repeat_interleave(video, per_block // groups, dim=2)
        return self.vae_encoding.encode(
            self.modules.vae, torch.cat([video[:, :, :1], video], dim=2)
        )

    @torch.no_grad()
    def _infer(
        self,
        session: Session,
        observation: Observation,
        state: np.ndarray,
        normalized_state: np.ndarray,
        return_video: bool,
        keep: tuple[bool, bool] = (False, False),
    ) -> ActionChunk:
        timings: dict[str, float] = {}
        start = time.perf_counter()
        keep_latents, keep_input = keep
        with self._timed(timings, 'inputs'):
            video, stitched = self._video(session)
        # Upstream restarts the window when the prompt's tokens change: compare the model's text.
        text = clean_prompt(self.embodiment.prompt(observation.prompt))
        new_window = session.needs_new_window(text, video.shape[2])
        with self._timed(timings, 'encode'):
            prompt = self.encode_prompt(text)
            negative = self.negative_prompt_embeds() if self.config.sampling.use_cfg else None
            if new_window:
                clip_tokens, y, context = self._window_conditioning(video)
            else:
                clip_tokens = y = None
                context = self._context_latents(video)
        inputs = ChunkInputs(
            prompt_embeds=prompt,
            negative_prompt_embeds=negative,
            context_latents=context,
            state=torch.from_numpy(normalized_state)[None].to(self.device),
            new_window=new_window,
            clip_tokens=clip_tokens,
            y=y,
            need_video=return_video or keep_latents,
        )
        output = self.denoiser.denoise_chunk(session.denoise, inputs)
        timings['prefill'] = output.timings_ms['context'] + output.timings_ms['prefill']
        timings['denoise'] = output.timings_ms['denoise']
        with self._timed(timings, 'decode'):
            actions = self.normalizer.denormalize_actions(
                output.actions[0].float().cpu().numpy(), state
            )
            frames = None
            if return_video:
                latents = output.video_latents
                if output.start_frame == 1:
                    latents = torch.cat([context[:, :, :1].to(latents.dtype), latents], dim=2)
                decoded = self.modules.vae.decode(latents)[0]
                frames = ((decoded.float() + 1) * 127.5).clamp(0, 255).to(torch.uint8)
                frames = frames.permute(1, 2, 3, 0).cpu().numpy()
        views = None
        if keep_latents or keep_input:
            latents = None
            if keep_latents and output.video_latents is not None:
                latents = torch.cat(
                    [context[:, :, -1:].to(output.video_latents.dtype), output.video_latents],
                    dim=2,
                )
            views = ChunkViews(
                self.modules.vae,
                self.embodiment.layout,
                self.embodiment.camera_keys,
                latents,
                stitched[-1].clone() if keep_input else None,
            )
        timings['total'] = (time.perf_counter() - start) * 1e3
        self.last_stats = {
            'dit_calls': output.dit_calls,
            'start_frame': output.start_frame,
            'new_window': new_window,
            'frames': video.shape[2],
            'step_similarities': output.step_similarities,
            'conditional_only_calls': output.conditional_only_calls,
        }
        if not np.all(np.isfinite(actions)):
            raise PolicyError('the model produced non-finite actions')
        session.prompt = text
        session.calls += 1
        return ActionChunk(
            actions=actions,
            stamp=observation.stamp,
            step_duration=1.0 / self.embodiment.control_hz,
            chunk_id=session.calls - 1,
            timing_ms=timings,
            video=frames,
            views=views,
        )


def _layout_shape(layout: BranchLayout | None, config: EngineConfig) -> tuple[int, int]:
    """``(cfg_rows, tp_size)`` of this process under ``layout`` (before it is attached)."""
    tp_size = 1 if layout is None else layout.tp_size
    rows = config.sampling.cfg_rows
    if layout is not None and type(layout) is not BranchLayout:
        import torch.distributed as dist

        world = dist.get_world_size() if dist.is_initialized() else 1
        rows = max(1, rows // max(1, world // tp_size))
    return rows, tp_size


def _require_checkpoint_folder(folder: Path) -> None:
    """Refuse, before anything else, a path that is not a checkpoint folder at all."""
    if not folder.is_dir():
        raise CheckpointError(f'no checkpoint folder {folder}: the path does not exist')
    if not (folder / CONFIG_FILE).is_file():
        raise CheckpointError(
            f'{folder} is not a DreamZero checkpoint: it has no {CONFIG_FILE} '
            '(a checkpoint folder holds config.json, model*.safetensors, experiment_cfg/ and '
            'tokenizer/spiece.model; docs/getting_started.md says how to get one)'
        )


def _tokenizer_path(
    folder: Path, base: str | Path | None, tokenizer_file: str | Path | None
) -> Path:
    """The sentencepiece model: the given file, else the checkpoint's, else its base's."""
    if tokenizer_file is not None:
        candidates = [Path(tokenizer_file)]
    else:
        candidates = [Path(f) / TOKENIZER_FILE for f in (folder, base) if f is not None]
    for path in candidates:
        if path.is_file():
            return path
    raise CheckpointError(
        f'missing tokenizer {candidates[0]}: copy spiece.model of google/umt5-xxl there '
        '(the published checkpoints carry none; docs/getting_started.md)'
    )
