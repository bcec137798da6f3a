# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What the view topics cost per chunk: keeping the views, decoding, cutting and JPEG-encoding.

Runs chunks of one session on a random-weight engine (``--preset``), each with and without
``predicted_video``/``model_input`` kept, and times, per chunk:

- ``chunk``: ``infer`` without views (the baseline), and ``chunk+keep`` with them kept (the
  only part on the command path: the last DiT call runs both CFG branches for the video);
- ``decode``: VAE decode of the predicted latents to uint8 frames (the views' thread);
- ``per camera``: cutting the stitched frames into camera views;
- ``jpeg``: encoding every frame (stitched + per camera) and the model input as JPEG.

``--vae-only`` times the decode alone with the full Wan2.1 VAE at DROID's latent size
(no DiT built), for a device that cannot hold the whole model.

    python benchmarks/predicted_video.py --preset small --chunks 4
    python benchmarks/predicted_video.py --vae-only --device cuda --dtype bfloat16
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

from bench_options import benchmark_parser, engine_options
from bench_timing import timed_ms
import numpy as np
import torch

from dreamzero_ros.core.observations.imagination import encode_frame
from dreamzero_ros.engine import DreamZeroEngine, EngineConfig
from dreamzero_ros.engine.checkpoint.synthetic_droid import random_observation
from dreamzero_ros.engine.networks.vae import WanVAE
from dreamzero_ros.engine.networks.vae_network import VAEConfig
from dreamzero_ros.engine.pipeline.predicted_video import decode_to_uint8


def _ms(values: list[float]) -> str:
    return f'{statistics.median(values):8.1f}'


def engine_benchmark(args: argparse.Namespace) -> None:
    """Chunks with and without the views kept, and the cost of each views stage."""
    config = EngineConfig.preset(args.preset, options=engine_options(args))
    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    plain = DreamZeroEngine.from_config(config, seed=0)
    device = plain.device
    rows: dict[str, list[float]] = {
        k: [] for k in ('chunk', 'chunk+keep', 'decode', 'per camera', 'jpeg')
    }
    frames_per_chunk = 0
    shape = None
    for index in range(args.chunks + 1):  # chunk 0 warms up and is not counted
        observation = random_observation(seed=index, session_id='bench', stamp=float(index))
        (base,) = timed_ms(device, lambda o=observation: plain.infer(o), 1)
        plain.reset('kept') if index == 0 else None
        kept_obs = dataclasses.replace(observation, session_id='kept')
        chunk = None

        def keep(o=kept_obs):
            nonlocal chunk
            chunk = plain.infer(o, predicted_video=True, model_input=True)

        (with_views,) = timed_ms(device, keep, 1)
        begin = time.perf_counter()
        frames = chunk.views.decode_predicted()
        decode = (time.perf_counter() - begin) * 1e3
        begin = time.perf_counter()
        cameras = chunk.views.per_camera(frames)
        cut = (time.perf_counter() - begin) * 1e3
        begin = time.perf_counter()
        for frame in frames:
            encode_frame(frame, 'jpeg')
        for view in cameras.values():
            for frame in view:
                encode_frame(frame, 'jpeg')
        encode_frame(chunk.views.model_input_frame(), 'jpeg')
        jpeg = (time.perf_counter() - begin) * 1e3
        if index == 0:
            continue
        frames_per_chunk, shape = len(frames), frames.shape[1:3]
        for key, value in zip(rows, (base, with_views, decode, cut, jpeg), strict=True):
            rows[key].append(value)
    baseline = statistics.median(rows['chunk'])
    print(
        f'\npreset {args.preset} on {args.device} ({args.dtype}), {args.chunks} chunks after '
        f'a warm-up, {torch.get_num_threads()} threads; {frames_per_chunk} predicted frames '
        f'of {shape[0]}x{shape[1]} per chunk, {len(cameras)} cameras'
    )
    print(f'{"stage":<12}{"median ms":>10}{"x chunk":>10}')
    for key, values in rows.items():
        print(f'{key:<12}{_ms(values)}  {statistics.median(values) / baseline:8.3f}')
    views = sum(statistics.median(rows[k]) for k in ('decode', 'per camera', 'jpeg'))
    print(f'{"views total":<12}{views:8.1f}  {views / baseline:8.3f}  (off the command path)')


def vae_benchmark(args: argparse.Namespace) -> None:
    """The Wan2.1 VAE decode alone at DROID's latent size (2 predicted + 1 observed latents)."""
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    vae = WanVAE(VAEConfig.wan21()).to(device, dtype).eval()
    latents = torch.randn(1, 16, 3, 44, 80, device=device, dtype=dtype)
    decode_to_uint8(vae, latents)  # warm-up
    times = timed_ms(device, lambda: decode_to_uint8(vae, latents), args.repeats)
    frames = decode_to_uint8(vae, latents)[1:]
    begin = time.perf_counter()
    for frame in frames:
        encode_frame(np.ascontiguousarray(frame), 'jpeg')
    jpeg = (time.perf_counter() - begin) * 1e3
    print(
        f'\nWan2.1 VAE decode, {args.device} {args.dtype}: {len(frames)} frames of '
        f'{frames.shape[1]}x{frames.shape[2]}: median {statistics.median(times):.1f} ms '
        f'(min {min(times):.1f}, {args.repeats} runs); JPEG of the stitched frames {jpeg:.1f} ms'
    )


def build_parser() -> argparse.ArgumentParser:
    """Command-line options (see ``--help``)."""
    parser = benchmark_parser(
        'predicted_video.py',
        __doc__.split('\n')[0],
        ('device', 'dtype', 'num_threads'),
        preset='small',
    )
    parser.add_argument('--chunks', type=int, default=4, help='chunks whose video is decoded')
    parser.add_argument('--repeats', type=int, default=5, help='timed runs')
    parser.add_argument('--vae-only', action='store_true', help='time the VAE decode alone')
    return parser


def main() -> None:
    """Parse the arguments and run the benchmark."""
    args = build_parser().parse_args()
    resolved = engine_options(args)
    args.device, args.dtype = resolved.device, resolved.dtype
    with torch.no_grad():
        (vae_benchmark if args.vae_only else engine_benchmark)(args)


if __name__ == '__main__':
    main()
