# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Camera view preparation on the host and on the device: time, uint8 agreement (``--inputs``)."""

from __future__ import annotations

import statistics

from bench_timing import timed_ms
import numpy as np
import torch

from dreamzero_ros.engine.checkpoint.synthetic_droid import random_observation
from dreamzero_ros.engine.pipeline.engine import DreamZeroEngine
from dreamzero_ros.engine.pipeline.model_inputs import prepare_views, to_model_video
from dreamzero_ros.policy_types import DROID_CAMERAS


def inputs_benchmark(engine: DreamZeroEngine, repeats: int = 20) -> dict:
    """The view preparation on the host and on the engine's device: time and uint8 agreement.

    Per frame count (1: a session's first call, 4: the others) it times the host path (crop,
    resize and stitch on the CPU, then the upload) and the device path (upload, then the same
    operations on the device); ``host`` is the time until the call returns, ``synced`` with
    the device caught up.  Agreement is counted on smooth noisy images, flat ones (every pixel
    200, which lands a hair below 200 in float32 before the truncation) and gradients.
    """
    device, embodiment, dtype = engine.device, engine.embodiment, engine.config.torch_dtype
    cpu = torch.device('cpu')
    rows = {}
    source = embodiment.cameras[0].source_size
    print(f'\nview preparation ({", ".join(map(str, source))} -> stitched), ms')
    for frames in (1, 4):
        clips = random_observation(seed=frames, frames=frames).images
        for label, where in (('host', cpu), ('device', device)):

            def run(where: torch.device = where, clips: dict = clips) -> torch.Tensor:
                return to_model_video(prepare_views(clips, embodiment, where), device, dtype)

            run()
            host = timed_ms(device, run, repeats, wait=False)
            synced = timed_ms(device, run, repeats)
            rows[f'{label}-{frames}'] = {
                'host_ms': statistics.median(host),
                'synced_ms': statistics.median(synced),
            }
            print(
                f'  {frames} frame(s) per view, prepared on the {label:<6}: '
                f'host {statistics.median(host):6.2f} ms, synced {statistics.median(synced):6.2f}'
                ' ms (medians)'
            )
    height, width = source
    flat = np.full((4, height, width, 3), 200, np.uint8)
    ramp = np.linspace(0, 255, width, dtype=np.float64)[None, None, :, None]
    ramp = np.broadcast_to(ramp, (4, height, width, 3)).astype(np.uint8)
    samples = {
        'smooth noisy': [random_observation(seed=s, frames=4).images for s in range(8)],
        'flat 200': [dict.fromkeys(DROID_CAMERAS, flat)],
        'gradient': [dict.fromkeys(DROID_CAMERAS, ramp)],
    }
    agreement = {}
    for name, clip_sets in samples.items():
        differ = total = largest = 0
        for clips in clip_sets:
            on_host = prepare_views(clips, embodiment, cpu).int()
            on_device = prepare_views(clips, embodiment, device).cpu().int()
            delta = (on_device - on_host).abs()
            differ += int((delta > 0).sum())
            total += delta.numel()
            largest = max(largest, int(delta.max()))
        agreement[name] = {'differing': differ, 'values': total, 'max_abs': largest}
        print(
            f'  {name:<12}: {differ} of {total} uint8 values differ between host and device '
            f'({differ / total:.2e}), by at most {largest}'
        )
    return {'timing': rows, 'agreement': agreement}
