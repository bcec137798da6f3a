# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What a native camera size costs the node per frame it uses: decode, then letterbox.

For each camera size, a ``sensor_msgs/Image``-like bgr8 frame (a real DROID frame scaled up,
or noise without the clips) goes through the observation cache as the node uses it: stored
undecoded, then decoded and letterboxed to 180x320 when an observation is built. Prints the
median milliseconds per frame and the ratio to a 320x180 camera (no resize). Only the frames an
observation picks are decoded (one per camera for single frames), once.

    python benchmarks/micro_camera_fit.py
"""

from __future__ import annotations

import statistics
import sys
import time
from types import SimpleNamespace

import numpy as np

from dreamzero_ros.core.observations.image_codec import encode_raw
from dreamzero_ros.core.observations.observation_cache import CacheConfig, ObservationCache
from dreamzero_ros.core.robot.panda import PANDA_ARM_JOINTS
from dreamzero_ros.droid_clips import demo_clips

SIZES = ((180, 320), (480, 640), (720, 1280), (1080, 1920))
ARM = PANDA_ARM_JOINTS


def frame_ms(frame: np.ndarray, repeats: int) -> float:
    """Median milliseconds to store, decode and letterbox one bgr8 frame of one camera."""
    raw = encode_raw(frame, 'bgr8')
    header = SimpleNamespace(stamp=SimpleNamespace(sec=1, nanosec=0))
    message = SimpleNamespace(header=header, **raw.__dict__)
    times = []
    for _ in range(repeats):
        cache = ObservationCache(
            CacheConfig(ARM, 'panda_gripper', cameras=('cam',), image_size=(180, 320))
        )
        cache.add_joint_state([*ARM, 'panda_gripper'], [0.0] * 8, 1.0)
        begin = time.perf_counter()
        cache.add_image_message('cam', message)
        observation = cache.build(1.0, 'p')
        times.append((time.perf_counter() - begin) * 1e3)
    assert observation.images['cam'].shape == (180, 320, 3)
    return statistics.median(times)


def main() -> int:
    """Print the table."""
    source = demo_clips(1)[0]['exterior_image_1_left'][0]
    results = {}
    for height, width in SIZES:
        scale = height / 180
        rows = (np.arange(height) / scale).astype(int)
        cols = (np.arange(width) / (width / 320)).astype(int)
        results[(height, width)] = frame_ms(source[rows][:, cols], repeats=15)
    base = results[SIZES[0]]
    print(f'{"camera":>12s}{"ms per frame":>15s}{"x 320x180":>11s}')
    for (height, width), ms in results.items():
        print(f'{width:>6d}x{height:<5d}{ms:15.2f}{ms / base:11.1f}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
