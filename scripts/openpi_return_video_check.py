# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Ask an OpenPI server for the predicted video with the reference ``openpi-client``.

Run it with the openpi-client's own Python (numpy<2), not the project's:

    .venv-openpi/bin/python scripts/openpi_return_video_check.py --port 8000

Sends the same DROID request on two sessions, one plain and one with ``return_video: true``,
then ``return_video`` as NumPy booleans (``np.bool_``, as a client's own flag often is), then
as ``"yes"`` and ``np.int64(1)``, and prints one JSON object: the reply keys, shapes and dtypes,
whether the actions agree, and the errors of the bad requests. Only ``openpi_client``
and NumPy are used, never the dreamzero_ros package.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from openpi_client import image_tools
from openpi_client.websocket_client_policy import WebsocketClientPolicy


def request(session_id: str) -> dict:
    """A DROID-keyed request with a smooth synthetic frame per camera."""
    rows = np.linspace(0, 255, 180, dtype=np.float32)[:, None, None]
    out = {}
    for seed, name in enumerate(('wrist_image', 'exterior_image_1', 'exterior_image_2')):
        image = np.broadcast_to(rows * (seed + 1) % 256, (180, 320, 3)).astype(np.uint8)
        out[f'observation/{name}_left'] = image_tools.resize_with_pad(image, 180, 320)
    out['observation/joint_position'] = np.linspace(-0.5, 0.5, 7)
    out['observation/gripper_position'] = np.array([0.2])
    out['prompt'] = 'put the marker in the cup'
    out['session_id'] = session_id
    return out


def describe(array: np.ndarray) -> dict:
    """Shape and dtype of an array."""
    return {'shape': list(array.shape), 'dtype': array.dtype.str}


def main() -> None:
    """Run the three requests and print the JSON summary."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--port', type=int, required=True)
    args = parser.parse_args()
    client = WebsocketClientPolicy('127.0.0.1', args.port)
    plain = client.infer(request('plain'))
    video = client.infer({**request('video'), 'return_video': True})
    predicted = video['predicted_video']
    out = {
        'plain_keys': sorted(plain),
        'video_keys': sorted(video),
        'predicted_keys': sorted(predicted),
        'frames': describe(predicted['frames']),
        'times_s': [float(t) for t in predicted['times_s']],
        'cameras': {key: describe(value) for key, value in predicted['cameras'].items()},
        'actions_max_difference': float(np.abs(plain['actions'] - video['actions']).max()),
    }
    numpy_true = client.infer({**request('video'), 'return_video': np.bool_(True)})
    numpy_false = client.infer({**request('plain'), 'return_video': np.bool_(False)})
    out['numpy_true_keys'] = sorted(numpy_true)
    out['numpy_false_keys'] = sorted(numpy_false)
    for name, value in (('bad', 'yes'), ('bad_int', np.int64(1))):
        try:
            client.infer({**request('bad'), 'return_video': value})
        except RuntimeError as error:
            out[name] = str(error)
    print(json.dumps(out))


if __name__ == '__main__':
    main()
