# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Exercise an OpenPI server with the reference ``openpi-client`` and print what happened.

Run it with the openpi-client's own Python (numpy<2), not the project's:

    .venv-openpi/bin/python scripts/openpi_client_check.py --port 8000 protocol

Scenarios (each prints one JSON object on stdout):

- ``protocol``: metadata, infer, reset, bad requests, infer after them, a session-less and a
  single-exterior-camera (sim-evals) request, the RoboArena key set, reconnect;
- ``oversized``: a request over the server's payload cap, then a fresh connection;
- ``api-key``: connections without the key and with a wrong one, then one with it;
- ``internal-error``: a request that makes the policy fail (prompt ``--fail-prompt``), the
  next call on the same connection, then a fresh connection;
- ``idle``: one request, ``--idle-s`` seconds of silence (the client's websockets library
  answers the server's keepalive pings meanwhile), then another request on the same session.

Only ``openpi_client`` and NumPy are used, never the dreamzero_ros package.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
import json
import sys
import time

import numpy as np
from openpi_client import image_tools
from openpi_client.websocket_client_policy import WebsocketClientPolicy

CAMERA_SHAPE = (720, 1280, 3)


def camera_frame(index: int, seed: int) -> np.ndarray:
    """A full-size synthetic camera frame that changes with ``index``."""
    rows = np.linspace(0.0, 1.0, CAMERA_SHAPE[0], dtype=np.float32)[:, None]
    cols = np.linspace(0.0, 1.0, CAMERA_SHAPE[1], dtype=np.float32)[None, :]
    frame = np.empty(CAMERA_SHAPE, dtype=np.uint8)
    for channel in range(3):
        wave = np.sin(2 * np.pi * (rows * (seed + 1) + cols + 0.05 * index) + channel)
        frame[..., channel] = (127.5 * (wave + 1.0)).astype(np.uint8)
    return frame


def droid_request(metadata: dict, index: int, session_id: str | None, size=(224, 224)) -> dict:
    """A DROID-keyed request as the DROID main loop builds it (resize_with_pad)."""
    request = {}
    names = ['wrist_image_left'] if metadata.get('needs_wrist_camera', True) else []
    names += [f'exterior_image_{i + 1}_left' for i in range(metadata.get('n_external_cameras', 1))]
    for seed, name in enumerate(names):
        image = camera_frame(index, seed)
        request[f'observation/{name}'] = image_tools.resize_with_pad(image, *size)
    request['observation/joint_position'] = np.linspace(-0.5, 0.5, 7) + 0.01 * index
    request['observation/gripper_position'] = np.array([0.2])
    request['prompt'] = 'put the marker in the cup'
    if session_id is not None:
        request['session_id'] = session_id
    return request


def roboarena_request(index: int) -> dict:
    """A RoboArena-keyed request carrying a 4-frame stack per camera, like DreamZero's client."""
    request = {}
    keys = ['wrist_image_left', 'exterior_image_0_left', 'exterior_image_1_left']
    for seed, name in enumerate(keys):
        stack = np.stack([camera_frame(index + t, seed) for t in range(4)])
        request[f'observation/{name}'] = image_tools.resize_with_pad(stack, 180, 320)
    request['observation/joint_position'] = np.zeros(7, dtype=np.float32)
    request['observation/cartesian_position'] = np.zeros(6, dtype=np.float32)
    request['observation/gripper_position'] = np.zeros(1, dtype=np.float32)
    request['prompt'] = 'wipe the table'
    request['session_id'] = np.zeros(1, dtype=np.int32)
    request['endpoint'] = 'infer'
    return request


def describe(reply) -> dict:
    """Plain-JSON summary of a reply."""
    if isinstance(reply, np.ndarray):
        return {'type': 'ndarray', 'shape': list(reply.shape), 'dtype': reply.dtype.str}
    out = {'type': 'dict', 'keys': sorted(reply)}
    actions = reply.get('actions')
    if isinstance(actions, np.ndarray):
        out.update(
            shape=list(actions.shape),
            dtype=actions.dtype.str,
            finite=bool(np.all(np.isfinite(actions))),
            first_row=actions[0].tolist(),
        )
    if 'server_timing' in reply:
        out['server_timing'] = sorted(reply['server_timing'])
    if 'chunk_id' in reply:
        out['chunk_id'] = int(reply['chunk_id'])
    if 'status' in reply:
        out['status'] = reply['status']
    return out


def raised(call) -> dict:
    """Run ``call`` expecting an exception; report its type and message."""
    start = time.monotonic()
    try:
        result = call()
    except Exception as error:  # noqa: BLE001 - reporting whatever the client raised
        return {
            'raised': type(error).__name__,
            'message': str(error)[:2000],
            'seconds': time.monotonic() - start,
        }
    return {'raised': None, 'result': describe(result)}


def scenario_protocol(args: argparse.Namespace) -> dict:
    """Metadata, infer, reset, bad requests, RoboArena keys and reconnect on one server."""
    client = WebsocketClientPolicy(args.host, args.port, api_key=args.api_key)
    metadata = client.get_server_metadata()
    out: dict = {'metadata': {k: v for k, v in metadata.items()}}
    out['infer'] = [
        describe(client.infer(droid_request(metadata, i, 'episode-1'))) for i in range(2)
    ]
    out['reset'] = describe(client.infer({'endpoint': 'reset', 'session_id': 'episode-1'}))
    out['after_reset'] = describe(client.infer(droid_request(metadata, 2, 'episode-1')))
    bad = droid_request(metadata, 3, 'episode-1')
    del bad['observation/wrist_image_left']
    out['missing_camera'] = raised(lambda: client.infer(bad))
    nan_state = droid_request(metadata, 3, 'episode-1')
    nan_state['observation/joint_position'][2] = np.nan
    out['nan_state'] = raised(lambda: client.infer(nan_state))
    out['after_error'] = describe(client.infer(droid_request(metadata, 3, 'episode-1')))
    out['no_session'] = describe(client.infer(droid_request(metadata, 0, None)))
    sim_evals = droid_request({**metadata, 'n_external_cameras': 1}, 0, 'one-exterior')
    out['one_exterior_camera'] = describe(client.infer(sim_evals))
    out['roboarena'] = describe(client.infer(roboarena_request(0)))
    client._ws.close()
    again = WebsocketClientPolicy(args.host, args.port, api_key=args.api_key)
    out['reconnect_metadata_equal'] = again.get_server_metadata() == metadata
    out['reconnect'] = describe(again.infer(droid_request(metadata, 0, 'episode-1')))
    return out


def scenario_oversized(args: argparse.Namespace) -> dict:
    """A request over the payload cap must raise in the client, not hang."""
    client = WebsocketClientPolicy(args.host, args.port, api_key=args.api_key)
    metadata = client.get_server_metadata()
    request = droid_request(metadata, 0, 'big')
    request['observation/wrist_image_left'] = np.zeros((args.oversize_mb, 1024, 1024), np.uint8)
    out = {'oversized': raised(lambda: client.infer(request))}
    fresh = WebsocketClientPolicy(args.host, args.port, api_key=args.api_key)
    out['fresh_connection_metadata_equal'] = fresh.get_server_metadata() == metadata
    return out


def scenario_api_key(args: argparse.Namespace) -> dict:
    """Handshakes without and with the wrong key fail; the right key works."""
    out = {
        'without_key': raised(lambda: WebsocketClientPolicy(args.host, args.port)),
        'wrong_key': raised(lambda: WebsocketClientPolicy(args.host, args.port, api_key='nope')),
    }
    client = WebsocketClientPolicy(args.host, args.port, api_key=args.api_key)
    out['with_key_metadata'] = client.get_server_metadata()
    return out


def scenario_internal_error(args: argparse.Namespace) -> dict:
    """A policy failure reaches the client as an error without a traceback."""
    client = WebsocketClientPolicy(args.host, args.port, api_key=args.api_key)
    metadata = client.get_server_metadata()
    request = droid_request(metadata, 0, 'boom')
    request['prompt'] = args.fail_prompt
    out = {'failing': raised(lambda: client.infer(request))}
    out['next_call'] = raised(lambda: client.infer(droid_request(metadata, 1, 'boom')))
    fresh = WebsocketClientPolicy(args.host, args.port, api_key=args.api_key)
    out['fresh_connection_metadata_equal'] = fresh.get_server_metadata() == metadata
    return out


def scenario_idle(args: argparse.Namespace) -> dict:
    """Two requests of one session with a long silence between them."""
    client = WebsocketClientPolicy(args.host, args.port, api_key=args.api_key)
    metadata = client.get_server_metadata()
    first = describe(client.infer(droid_request(metadata, 0, 'patient')))
    time.sleep(args.idle_s)
    second = raised(lambda: client.infer(droid_request(metadata, 1, 'patient')))
    return {'first': first, 'after_idle': second}


SCENARIOS = {
    'protocol': scenario_protocol,
    'oversized': scenario_oversized,
    'api-key': scenario_api_key,
    'internal-error': scenario_internal_error,
    'idle': scenario_idle,
}


def scenario_parser(doc: str, scenarios: Mapping[str, Callable]) -> argparse.ArgumentParser:
    """Command line of a client-scenario script: which scenario, the server's host and port."""
    parser = argparse.ArgumentParser(description=doc.split('\n\n')[0])
    parser.add_argument('scenario', choices=sorted(scenarios))
    parser.add_argument('--host', default='127.0.0.1')
    parser.add_argument('--port', type=int, default=8000)
    return parser


def main() -> int:
    """Run one scenario and print its JSON report."""
    parser = scenario_parser(__doc__, SCENARIOS)
    parser.add_argument('--api-key', default=None)
    parser.add_argument('--oversize-mb', type=int, default=24, help='size of the oversized image')
    parser.add_argument('--fail-prompt', default='fail now', help='prompt the policy fails on')
    parser.add_argument('--idle-s', type=float, default=5.0, help='silence of the idle scenario')
    args = parser.parse_args()
    json.dump(SCENARIOS[args.scenario](args), sys.stdout)
    print()
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
