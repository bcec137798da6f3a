# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Talk to an OpenPI server the way each real client other than openpi-client does.

Each scenario repeats one client's calls and checks (read from its public source; see the
client matrix in docs/openpi_bridge.md), using the reference ``openpi_client.msgpack_numpy``
and ``websockets`` as those clients do, and prints one JSON report. Run it with the
openpi-client's own Python:

    .venv-openpi/bin/python scripts/openpi_client_conventions.py --port 8000 seed-sim-eval

Scenarios:

- ``dreamzero-test-client``: upstream DreamZero's ``test_client_AR.py`` (RoboArena keys, one
  frame then 4-frame stacks, needs a bare ``(H, 8)`` array, ``reset({})``);
- ``seed-example``: the seed integration's example client (its route, needs bare arrays, a
  reset answered by the text ``reset successful`` or a map whose ``status`` says so);
- ``seed-sim-eval``: the seed's DROID sim-eval client (``resize_with_pad`` to 180x320, a
  ``(24, 8)`` array, a text reset reply, a new session id per episode);
- ``roboarena-selftest``: RoboArena's ``scripts/test_policy_server.py`` (needs a map with
  ``actions``);
- ``roboarena-evaluator``: RoboArena's evaluation client (DROID keys, frames stretched to the
  metadata's resolution, reads ``result["actions"]``, executes whole chunks,
  ``reset({"session_id"})``).

Only openpi-client, websockets, Pillow and NumPy are used, never the dreamzero_ros package.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import uuid

import numpy as np
from openpi_client import image_tools, msgpack_numpy
from openpi_client_check import camera_frame, scenario_parser
from PIL import Image
import websockets.sync.client

SEED_ROUTE = '/v1/realtime/robot/openpi'


@dataclasses.dataclass
class PolicyServerConfig:
    """RoboArena's server configuration: clients build it from the metadata map."""

    image_resolution: tuple[int, int] | None = (224, 224)
    needs_wrist_camera: bool = True
    n_external_cameras: int = 1
    needs_stereo_camera: bool = False
    needs_session_id: bool = False
    action_space: str = 'joint_position'


class Client:
    """The connection those clients open: no compression, no size limit, their ping settings."""

    def __init__(self, args: argparse.Namespace, path: str = '', ping=(20.0, 20.0)) -> None:
        self._ws = websockets.sync.client.connect(
            f'ws://{args.host}:{args.port}{path}',
            compression=None,
            max_size=None,
            ping_interval=ping[0],
            ping_timeout=ping[1],
        )
        self.metadata = msgpack_numpy.unpackb(self._ws.recv())
        self._packer = msgpack_numpy.Packer()

    def call(self, request: dict, endpoint: str) -> bytes | str:
        """Send ``request`` with ``endpoint`` set; the raw reply."""
        self._ws.send(self._packer.pack({**request, 'endpoint': endpoint}))
        return self._ws.recv()

    def infer(self, request: dict):
        """Their ``infer``: a text reply is an error."""
        reply = self.call(request, 'infer')
        if isinstance(reply, str):
            raise RuntimeError(f'Error in inference server:\n{reply}')
        return msgpack_numpy.unpackb(reply)


def state(request: dict, dtype=np.float32) -> dict:
    """The state fields every RoboArena-style client sends."""
    request['observation/joint_position'] = np.zeros(7, dtype=dtype)
    request['observation/cartesian_position'] = np.zeros(6, dtype=dtype)
    request['observation/gripper_position'] = np.zeros(1, dtype=dtype)
    return request


def roboarena_keys(index: int, frames: int, size=(180, 320)) -> dict:
    """``exterior_image_0_left``, ``_1_`` and the wrist camera, resize_with_pad-ed."""
    names = ('exterior_image_0_left', 'exterior_image_1_left', 'wrist_image_left')
    request = {}
    for seed, name in enumerate(names):
        stack = np.stack([camera_frame(index + t, seed) for t in range(frames)])
        stack = image_tools.resize_with_pad(stack, *size)
        request[f'observation/{name}'] = stack[0] if frames == 1 else stack
    return request


def actions_of(reply) -> dict:
    """Shape and dtype of a bare-array reply; raises as those clients do on anything else."""
    actions = np.asarray(reply, dtype=np.float32)
    if actions.ndim != 2 or actions.shape[-1] != 8:
        raise AssertionError(f'expected an (H, 8) array, got shape {actions.shape}')
    return {'type': type(reply).__name__, 'shape': list(actions.shape)}


def run(call) -> dict:
    """``call``'s result, or the exception it raised."""
    try:
        return {'ok': True, 'result': call()}
    except Exception as error:  # noqa: BLE001 - reported to the test
        return {'ok': False, 'raised': type(error).__name__, 'message': str(error)[:500]}


def dreamzero_test_client(args: argparse.Namespace) -> dict:
    """Upstream DreamZero's test client."""
    client = Client(args, ping=(60, 600))
    config = PolicyServerConfig(**client.metadata)
    session_id = str(uuid.uuid4())
    replies = []
    for index, frames in enumerate((1, 4, 4)):
        request = state(roboarena_keys(index * 8, frames))
        request.update(prompt='wipe the pan', session_id=session_id)
        reply = client.infer(request)
        if not isinstance(reply, np.ndarray):
            raise AssertionError(f'Expected numpy array, got {type(reply)}')
        replies.append(actions_of(reply))
    reset = client.call({}, 'reset')
    return {
        'n_external_cameras': config.n_external_cameras,
        'actions': replies,
        'reset_reply': type(reset).__name__,
    }


def seed_reset(reply: bytes | str) -> str:
    """The seed example client's reset check."""
    if isinstance(reply, str):
        return reply
    decoded = msgpack_numpy.unpackb(reply)
    if not isinstance(decoded, dict) or decoded.get('status') != 'reset successful':
        raise RuntimeError(f'Unexpected reset response: {decoded!r}')
    return str(decoded['status'])


def seed_example(args: argparse.Namespace) -> dict:
    """The seed integration's example client: infer, infer, reset, infer."""
    client = Client(args, SEED_ROUTE, ping=(300, 3600))
    session_id = str(uuid.uuid4())
    requests = []
    for index, frames in enumerate((1, 4)):
        request = state(roboarena_keys(index * 8, frames))
        request.update(prompt='wipe the pan', session_id=session_id)
        requests.append(request)
    actions = [actions_of(client.infer(request)) for request in requests]
    status = seed_reset(client.call({}, 'reset'))
    actions.append(actions_of(client.infer(requests[0])))
    return {'actions': actions, 'reset_status': status}


def seed_sim_eval(args: argparse.Namespace) -> dict:
    """The seed's DROID sim-eval client: two short episodes, a new session id for each."""
    client = Client(args, SEED_ROUTE, ping=(60, 600))
    episodes = []
    for _ in range(2):
        session_id = str(uuid.uuid4())
        shapes = []
        for step in range(2):
            request = {
                f'observation/{name}': image_tools.resize_with_pad(
                    camera_frame(step * 8, seed), 180, 320
                )
                for seed, name in enumerate(
                    ('exterior_image_0_left', 'exterior_image_1_left', 'wrist_image_left')
                )
            }
            state(request, np.float64)
            request.update(prompt='put the cube in the bowl', session_id=session_id)
            actions = np.asarray(client.infer(request), dtype=np.float32)
            if actions.shape != (24, 8):
                raise AssertionError(f'Expected action shape (24, 8), got {actions.shape}')
            shapes.append(list(actions.shape))
        reply = client.call({}, 'reset')
        if not isinstance(reply, str):
            raise RuntimeError(f'Unexpected reset response: {type(reply)!r}')
        episodes.append({'shapes': shapes, 'reset_reply': reply})
    return {'episodes': episodes}


def roboarena_selftest(args: argparse.Namespace) -> dict:
    """RoboArena's policy-server self-test."""
    client = Client(args)
    config = PolicyServerConfig(**client.metadata)
    height, width = config.image_resolution
    request = {'observation/wrist_image_left': np.zeros((height, width, 3), np.uint8)}
    for index in range(config.n_external_cameras):
        request[f'observation/exterior_image_{index}_left'] = np.zeros((height, width, 3), np.uint8)
    if config.needs_session_id:
        request['session_id'] = '38DSA3hd3'
    request = state(request)
    request['prompt'] = 'test'
    reply = client.infer(request)
    if type(reply) is not dict or 'actions' not in reply:
        raise AssertionError(f'expected a dict holding actions, got {type(reply).__name__}')
    actions = reply['actions']
    if not isinstance(actions, np.ndarray) or actions.ndim != 2 or actions.shape[-1] != 8:
        raise AssertionError('bad actions')
    client.call({}, 'reset')
    return {'shape': list(actions.shape)}


def roboarena_evaluator(args: argparse.Namespace) -> dict:
    """RoboArena's evaluation client: one policy evaluation of three chunks, then reset."""
    client = Client(args)
    config = client.metadata
    height, width = config['image_resolution']
    session_id = f'{uuid.uuid4()}-A'
    executed = []
    for chunk in range(3):
        request = {}
        for seed, name in enumerate(
            ('exterior_image_1_left', 'exterior_image_2_left', 'wrist_image_left')
        ):
            camera = Image.fromarray(camera_frame(chunk * 8, seed)).resize(
                (512, 288), resample=Image.LANCZOS
            )
            request[f'observation/{name}'] = image_tools.convert_to_uint8(
                np.asarray(camera.resize((width, height), resample=Image.LANCZOS))
            )
        state(request, np.float64)
        request['prompt'] = 'put the marker in the cup'
        if config.get('needs_session_id'):
            request['session_id'] = session_id
        result = client.infer(request)
        executed.append(len(np.asarray(result['actions'])))
    client.call({'session_id': session_id}, 'reset')
    return {'executed_per_chunk': executed}


SCENARIOS = {
    'dreamzero-test-client': dreamzero_test_client,
    'seed-example': seed_example,
    'seed-sim-eval': seed_sim_eval,
    'roboarena-selftest': roboarena_selftest,
    'roboarena-evaluator': roboarena_evaluator,
}


def main() -> int:
    """Run one scenario and print ``{"ok", "result"}`` or ``{"ok": false, "raised", ...}``."""
    args = scenario_parser(__doc__, SCENARIOS).parse_args()
    json.dump(run(lambda: SCENARIOS[args.scenario](args)), sys.stdout)
    print()
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
