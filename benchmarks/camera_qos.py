# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Received fraction of raw camera frames across processes, best-effort against reliable.

A publisher process sends ``--frames`` rgb8 frames at ``--rate`` Hz; this process reads them
as the policy node does (:class:`~dreamzero_ros.ros.polled_inputs.PolledSubscription`, taken
at ``--read-rate`` Hz) and counts the distinct frames it got, and how old they were when read
(stamp to read, which includes up to one read period of waiting). Each size runs three ways: a
best-effort publisher (``qos_profile_sensor_data``, many drivers) and a reliable one (the
image_transport default) to a best-effort reader, and a reliable publisher to a reliable
reader. Whatever DDS the environment selects (default: Fast DDS with its default settings).

    python benchmarks/camera_qos.py --sizes 320x180 1280x720 1920x1080 --frames 150
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import numpy as np
import rclpy
from rclpy.qos import HistoryPolicy, QoSProfile
from sensor_msgs.msg import Image

from dreamzero_ros.ros.polled_inputs import RELIABILITY, PolledSubscription

TOPIC = 'camera_qos_benchmark'
#: (publisher reliability, reader reliability) pairs, in the order printed.
PAIRS = (('best_effort', 'best_effort'), ('reliable', 'best_effort'), ('reliable', 'reliable'))


def publish(size: str, frames: int, rate: float, reliability: str, wait: float) -> int:
    """Publisher process: wait for one reader, send ``frames`` frames, linger, exit."""
    width, height = (int(part) for part in size.split('x'))
    rclpy.init()
    node = rclpy.create_node('camera_qos_publisher')
    qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=5, reliability=RELIABILITY[reliability])
    publisher = node.create_publisher(Image, TOPIC, qos)
    end = time.monotonic() + wait
    while publisher.get_subscription_count() == 0 and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(1.0)  # let discovery settle both ways
    pixels = np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype=np.uint8)
    msg = Image(height=height, width=width, encoding='rgb8', step=width * 3)
    msg.data = pixels.tobytes()
    start = time.monotonic()
    for index in range(frames):
        msg.header.frame_id = str(index)
        msg.header.stamp = node.get_clock().now().to_msg()
        publisher.publish(msg)
        delay = start + (index + 1) / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    time.sleep(2.0)  # a reliable writer resends what is still unacknowledged
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


def measure(
    node, size: str, frames: int, rate: float, read_rate: float, depth: int, pair: tuple
) -> tuple[int, list[float]]:
    """Frames received (distinct) and their ages when read, s, for one publisher/reader pair."""
    writer, reader = pair
    subscription = PolledSubscription(node, Image, TOPIC, depth, reader)
    publisher = subprocess.Popen(
        [sys.executable, __file__, '--publish', size, '--frames', str(frames),
         '--rate', str(rate), '--writer', writer],
    )  # fmt: skip
    ages: dict[str, float] = {}

    def read() -> None:
        now = node.get_clock().now().nanoseconds * 1e-9
        for msg in subscription.take():
            stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
            ages.setdefault(msg.header.frame_id, now - stamp)

    try:
        while publisher.poll() is None:
            rclpy.spin_once(node, timeout_sec=0.0)
            read()
            time.sleep(1.0 / read_rate)
        read()
    finally:
        if publisher.poll() is None:
            publisher.kill()
        subscription.destroy()
    return len(ages), list(ages.values())


def main() -> int:
    """Run every size and pair; print received fractions against best-effort's."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--sizes', nargs='+', default=['320x180', '1280x720', '1920x1080'])
    parser.add_argument('--frames', type=int, default=150, help='frames per run')
    parser.add_argument('--rate', type=float, default=15.0, help='camera rate, Hz')
    parser.add_argument('--read-rate', type=float, default=15.0, help="the node's reads, Hz")
    parser.add_argument('--depth', type=int, default=3, help='reader history depth')
    parser.add_argument('--publish', metavar='WxH', help=argparse.SUPPRESS)
    parser.add_argument('--writer', default='reliable', help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.publish:
        return publish(options.publish, options.frames, options.rate, options.writer, 30.0)
    rclpy.init()
    node = rclpy.create_node('camera_qos_reader')
    print(
        f'{options.frames} rgb8 frames at {options.rate:g} Hz per run, read at '
        f'{options.read_rate:g} Hz, reader depth {options.depth}'
    )
    print(
        f'{"size":>10} {"publisher":>12} {"reader":>12} {"received":>10} {"fraction":>9} '
        f'{"age p50/p95 ms":>15}'
    )
    for size in options.sizes:
        baseline = None
        for pair in PAIRS:
            received, ages = measure(
                node, size, options.frames, options.rate, options.read_rate, options.depth, pair
            )
            fraction = received / options.frames
            baseline = fraction if baseline is None else baseline
            ratio = f'  x{fraction / baseline:.2f} of best_effort' if baseline else ''
            age = (
                f'{np.percentile(ages, 50) * 1e3:.0f}/{np.percentile(ages, 95) * 1e3:.0f}'
                if ages
                else '-'
            )
            print(
                f'{size:>10} {pair[0]:>12} {pair[1]:>12} {received:>5}/{options.frames:<4} '
                f'{fraction:>8.0%} {age:>15}{ratio}',
                flush=True,
            )
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
