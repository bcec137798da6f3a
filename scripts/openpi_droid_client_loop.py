# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A DROID control loop against an OpenPI server, the way sim-evals and the DROID main loop run.

At 15 Hz: read the cameras and joint state, and every ``--open-loop-horizon`` (8) steps send a
request with the DROID keys (images shrunk with ``resize_with_pad``) and execute the returned
chunk one row per step (joint position control, gripper binarised at 0.5). Camera frames come
from an ``.npz`` of ``camera name -> (T, H, W, 3)`` uint8 (for example the DROID clips) or are
synthetic. Prints one JSON summary. Run it with the openpi-client's own Python:

    .venv-openpi/bin/python scripts/openpi_droid_client_loop.py --port 8000 --steps 48

Only ``openpi_client`` and NumPy are used, never the dreamzero_ros package.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid

import numpy as np
from openpi_client import image_tools
from openpi_client.websocket_client_policy import WebsocketClientPolicy
from openpi_client_check import camera_frame

FRANKA_HOME = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])


def camera_names(metadata: dict, external_cameras: int | None) -> list[str]:
    """DROID camera names to send: those the server asks for, or ``external_cameras``."""
    names = ['wrist_image_left'] if metadata.get('needs_wrist_camera', True) else []
    count = metadata['n_external_cameras'] if external_cameras is None else external_cameras
    return names + [f'exterior_image_{i + 1}_left' for i in range(count)]


def load_frames(path: str | None, names: list[str]) -> dict[str, np.ndarray]:
    """Camera frames from an .npz, or 30 synthetic full-size frames per camera."""
    if path is None:
        return {
            name: np.stack([camera_frame(t, s) for t in range(30)]) for s, name in enumerate(names)
        }
    with np.load(path) as data:
        return {name: data[name] for name in names}


def run(args: argparse.Namespace) -> dict:
    """Run the loop; return its summary."""
    client = WebsocketClientPolicy(args.host, args.port, api_key=args.api_key)
    metadata = client.get_server_metadata()
    names = camera_names(metadata, args.external_cameras)
    frames = load_frames(args.frames, names)
    height, width = args.image_size
    session_id = args.session_id or str(uuid.uuid4())
    joints, gripper = FRANKA_HOME.copy(), np.zeros(1)
    chunk, executed = None, 0
    latencies, horizons, chunk_ids, overruns = [], [], [], 0
    period = 1.0 / args.hz
    start = next_tick = time.monotonic()
    for step in range(args.steps):
        if chunk is None or executed >= args.open_loop_horizon:
            request = {
                f'observation/{name}': image_tools.resize_with_pad(
                    frames[name][step % len(frames[name])], height, width
                )
                for name in names
            }
            request['observation/joint_position'] = joints.copy()
            request['observation/gripper_position'] = gripper.copy()
            request['prompt'] = args.prompt
            request['session_id'] = session_id
            sent = time.monotonic()
            reply = client.infer(request)
            chunk = reply['actions']
            chunk_ids.append(int(reply.get('chunk_id', -1)))
            latencies.append((time.monotonic() - sent) * 1000.0)
            horizons.append(int(chunk.shape[0]))
            if chunk.ndim != 2 or chunk.shape[1] != 8 or chunk.shape[0] < args.open_loop_horizon:
                raise RuntimeError(f'unexpected action chunk shape {chunk.shape}')
            if not np.all(np.isfinite(chunk)):
                raise RuntimeError('non-finite actions')
            executed = 0
            next_tick = time.monotonic()
        action = chunk[executed]
        executed += 1
        joints = np.asarray(action[:7], dtype=np.float64)
        gripper = np.array([1.0 if action[7] > 0.5 else 0.0])
        next_tick += period
        delay = next_tick - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            overruns += 1
    return {
        'steps': args.steps,
        'queries': len(latencies),
        'horizons': horizons,
        'chunk_ids': chunk_ids,
        'latency_ms': latencies,
        'control_overruns': overruns,
        'elapsed_s': time.monotonic() - start,
        'final_joint_position': joints.tolist(),
        'metadata': metadata,
        'session_id': session_id,
    }


def _size(text: str) -> tuple[int, int]:
    height, width = text.lower().split('x')
    return int(height), int(width)


def main() -> int:
    """Parse arguments, run the loop, print the JSON summary."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--host', default='127.0.0.1')
    parser.add_argument('--port', type=int, default=8000)
    parser.add_argument('--api-key', default=None)
    parser.add_argument('--steps', type=int, default=48, help='control steps to run')
    parser.add_argument('--hz', type=float, default=15.0, help='control rate')
    parser.add_argument('--open-loop-horizon', type=int, default=8, help='steps per query')
    parser.add_argument(
        '--image-size', type=_size, default=(224, 224), help='HxW sent, e.g. 180x320'
    )
    parser.add_argument(
        '--external-cameras',
        type=int,
        default=None,
        help='exterior cameras to send (default: the metadata; sim-evals sends 1)',
    )
    parser.add_argument('--frames', default=None, help='.npz of camera name -> (T, H, W, 3) uint8')
    parser.add_argument('--prompt', default='put the marker in the cup')
    parser.add_argument('--session-id', default=None, help='default: a fresh uuid')
    json.dump(run(parser.parse_args()), sys.stdout)
    print()
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
