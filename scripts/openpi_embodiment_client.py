# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A client of a DreamZero OpenPI server for a robot other than DROID, built from its metadata.

Reads the metadata frame (cameras with their resolutions, state keys with their widths), sends
``--requests`` observations in those keys (``observation/<camera>``: a frame shrunk with
``resize_with_pad`` to the camera's resolution; ``observation/<state key>``: a state vector),
and prints one JSON summary: the metadata and each reply's shape, dtype and finiteness. Run it
with the openpi-client's own Python:

    .venv-openpi/bin/python scripts/openpi_embodiment_client.py --port 8000 --requests 2

Only ``openpi_client`` and NumPy are used, never the dreamzero_ros package.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from openpi_client import image_tools
from openpi_client.websocket_client_policy import WebsocketClientPolicy


def request(metadata: dict, index: int, rng: np.random.Generator) -> dict:
    """One observation in the server's own keys."""
    out = {}
    for camera, (height, width) in zip(
        metadata['cameras'], metadata['camera_resolutions'], strict=True
    ):
        frame = rng.integers(0, 255, (2 * height, 2 * width, 3), dtype=np.uint8)
        out[f'observation/{camera}'] = image_tools.resize_with_pad(frame, height, width)
    for key, dim in zip(metadata['state_keys'], metadata['state_dims'], strict=True):
        out[f'observation/{key}'] = rng.uniform(-0.5, 0.5, dim) + 0.01 * index
    out['prompt'] = 'pick up the block'
    out['session_id'] = 'embodiment-client'
    return out


def main() -> None:
    """Parse the options, run the requests, print the summary."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--host', default='127.0.0.1')
    parser.add_argument('--port', type=int, required=True)
    parser.add_argument('--requests', type=int, default=2)
    parser.add_argument('--drop-state-key', help='leave this state key out of every request')
    args = parser.parse_args()
    client = WebsocketClientPolicy(args.host, args.port)
    metadata = client.get_server_metadata()
    rng = np.random.default_rng(0)
    replies = []
    for index in range(args.requests):
        observation = request(metadata, index, rng)
        if args.drop_state_key:
            del observation[f'observation/{args.drop_state_key}']
        try:
            actions = np.asarray(client.infer(observation)['actions'])
        except Exception as error:  # noqa: BLE001 -- the summary reports what the server said
            replies.append({'raised': type(error).__name__, 'message': str(error)})
            continue
        replies.append(
            {
                'shape': list(actions.shape),
                'dtype': actions.dtype.str,
                'finite': bool(np.all(np.isfinite(actions))),
            }
        )
    print(json.dumps({'metadata': metadata, 'replies': replies}, default=str))


if __name__ == '__main__':
    main()
