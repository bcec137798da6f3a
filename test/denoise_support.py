# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A stream of chunk inputs and a run of the denoiser over it, for the tiny DiT of dit_support."""

from dit_support import H, W
import torch

from dreamzero_ros.engine.config import Sampling
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.engine.pipeline.denoise import ChunkDenoiser, ChunkInputs
from dreamzero_ros.engine.step_cache import StepCacheConfig

#: Every similarity test passes: DiT on steps 0, 1, 6 and 11 only.
DYNAMIC_MIN = StepCacheConfig(thresholds=(-2.0,), countdowns=(4,))
#: No similarity test passes: DiT on all 16 steps.
DYNAMIC_NEVER = StepCacheConfig(thresholds=(2.0,), countdowns=(4,))


def chunk_stream(count: int, need_video: bool, seed: int = 0) -> list[ChunkInputs]:
    """A window's first chunk and continuing chunks (a new window every 4), batch 1."""
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g)

    text, negative = r(1, 512, 64), r(1, 512, 64)
    chunks = []
    for index in range(count):
        new = index % 4 == 0
        chunks.append(
            ChunkInputs(
                prompt_embeds=text,
                negative_prompt_embeds=negative,
                context_latents=r(1, 16, 1 if new else 2, H, W),
                state=r(1, 64),
                new_window=new,
                clip_tokens=r(1, 257, 32) if new else None,
                y=r(1, 20, 9, H, W) if new else None,
                need_video=need_video,
            )
        )
    return chunks


def run_chunks(
    dit,
    chunks: list[ChunkInputs],
    rows: list | None = None,
    sampling: Sampling | None = None,
    options: EngineOptions | None = None,
    compile_backend: str = 'inductor',
):
    """Outputs of the chunks on a fresh session; ``rows`` collects each DiT call's batch."""
    denoiser = ChunkDenoiser(dit, sampling, options, compile_backend=compile_backend)
    session = denoiser.open_session()
    forward = dit.forward
    if rows is not None:

        def counting(latents, *args, **kwargs):
            rows.append(latents.shape[0])
            return forward(latents, *args, **kwargs)

        dit.forward = counting
    try:
        return [denoiser.denoise_chunk(session, chunk) for chunk in chunks]
    finally:
        if rows is not None:
            del dit.forward
