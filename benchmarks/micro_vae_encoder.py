# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The VAE encoder alone, per speed option: time, memory and latent differences (``--vae``)."""

from __future__ import annotations

import statistics
import time

from bench_timing import timed_ms
import torch

from dreamzero_ros.engine.networks.vae_network import norm_silu_conv
from dreamzero_ros.engine.pipeline.engine import DreamZeroEngine
from dreamzero_ros.engine.speed.vae_fused import FusedNormConv

#: VAE encoder options timed by ``--vae``: (frames per pass, channels_last_3d, compiled norms).
VAE_OPTIONS = (
    (4, False, False),
    (0, False, False),
    (4, True, False),
    (0, True, False),
    (4, True, True),
    (0, True, True),
)


def vae_benchmark(engine: DreamZeroEngine, repeats: int = 5) -> list[dict]:
    """Time the VAE encoder on a continuing chunk's and a new window's video, per option.

    Options: frames per pass (4 = upstream, 0 = all after the first in one pass), the
    ``channels_last_3d`` layout and the compiled norm/SiLU/padding kernels; cuDNN picks its
    fastest kernels (as with ``compile``).  Also reports each option's largest latent difference
    from the 4-frame, default-layout encoding, and the peak memory of the encoding alone.
    """
    device, vae = engine.device, engine.modules.vae
    if device.type == 'cuda':
        torch.backends.cudnn.benchmark = True
    backend = engine.config.compile_backend
    height, width = engine.embodiment.stitched_size
    generator = torch.Generator(device).manual_seed(0)
    results = []
    print(f'\nVAE encoder, {height}x{width} frames, mean of {repeats} (ms)')
    for frames in (9, engine.config.num_frames):
        video = torch.rand(1, 3, frames, height, width, device=device, generator=generator)
        video = (video * 2 - 1).to(engine.config.torch_dtype)
        reference = None
        for per_pass, channels_last, fused in VAE_OPTIONS:
            options = (per_pass, channels_last, FusedNormConv(backend) if fused else norm_silu_conv)
            begin = time.perf_counter()
            latents = vae.encode(video, *options)  # warm-up / autotune / compile
            first_s = time.perf_counter() - begin
            if reference is None:
                reference = latents.float()
            base = 0
            if device.type == 'cuda':
                torch.cuda.synchronize(device)
                torch.cuda.reset_peak_memory_stats(device)
                base = torch.cuda.memory_allocated(device)
            times = timed_ms(device, lambda v=video, o=options: vae.encode(v, *o), repeats)
            extra = (torch.cuda.max_memory_allocated(device) - base) / 2**30 if base else 0.0
            row = {
                'frames': frames,
                'frames_per_pass': per_pass,
                'channels_last': channels_last,
                'compiled': fused,
                'ms': statistics.fmean(times),
                'first_call_s': first_s,
                'activation_gib': extra,
                'max_abs_diff': float((latents.float() - reference).abs().max()),
            }
            results.append(row)
            print(
                f'  {frames:>2} frames, {"all" if per_pass == 0 else per_pass:>3} per pass, '
                f'{"channels_last_3d" if channels_last else "contiguous":<16}'
                f'{", compiled norms" if fused else "":<16}: {row["ms"]:7.1f} ms, '
                f'activations {extra:5.2f} GiB, first call {first_s:5.1f} s, '
                f'max |d latent| {row["max_abs_diff"]:.3g}'
            )
    return results
