# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The OpenPI server driving the real tiny DreamZero engine, exercised by real clients.

The reference openpi-client runs in its own venv (numpy<2) as a separate process; raw
WebSocket clients cover what it cannot send (malformed frames, pings during inference).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import re
import signal
import socket
import subprocess
import threading
import time

from machine_load import load_factor
import numpy as np
from openpi_support import (
    CHECK,
    CLIENT_CONFIG,
    LOOP,
    REPO,
    droid_frames,
    droid_request,
    healthz,
    openpi_python,
    run_openpi,
    tiny_engine,
)
import pytest
from script_paths import installed_script
from websockets.sync.client import connect

from dreamzero_ros.openpi import OpenPIServer, RemoteOpenPIPolicy, ServerConfig, msgpack_numpy
from dreamzero_ros.openpi.cli import API_KEY_ENV, build_parser, read_api_key
from dreamzero_ros.policy_types import Observation, ObservationError, PolicyError

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

#: A checkout (or git directory) of upstream dreamzero0/dreamzero whose RoboArena client and
#: server the last two tests run against ours; they are skipped where it is not set.
UPSTREAM_ENV = 'DREAMZERO_UPSTREAM_REPO'
#: What the engine's PolicyError says when CUDA runs out of memory (device and process details).
CUDA_OOM = (
    'CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 139.81 GiB '
    'of which 1.20 GiB is free. Process 4242 has 138.50 GiB memory in use.'
)


@pytest.fixture(scope='module')
def engine(tmp_path_factory):
    return tiny_engine(tmp_path_factory.mktemp('tiny-checkpoint'))


@pytest.fixture(scope='module')
def server(engine):
    handle = OpenPIServer(engine, ServerConfig(port=0, max_payload_bytes=4 * 2**20)).start()
    yield handle
    handle.stop()


@pytest.fixture(scope='module')
def frames_npz(tmp_path_factory):
    path = tmp_path_factory.mktemp('frames') / 'droid.npz'
    np.savez(path, **droid_frames(24))
    return str(path)


class FailingPolicy:
    """The engine, except that two prompts make it fail.

    ``fail now`` fails as the engine does when CUDA runs out of memory (a PolicyError wrapping
    the RuntimeError, with device and process details); ``crash now`` raises an unexpected
    exception (a bug).
    """

    def __init__(self, policy):
        self._policy = policy
        self.metadata = policy.metadata

    def infer(self, observation):
        if observation.prompt == 'fail now':
            try:
                raise RuntimeError(CUDA_OOM)
            except RuntimeError as error:
                raise PolicyError(f'inference failed: {error}') from error
        if observation.prompt == 'crash now':
            raise KeyError('secret detail /home/user/model.py line 42')
        return self._policy.infer(observation)

    def reset(self, session_id='default'):
        self._policy.reset(session_id)


class SlowPolicy(FailingPolicy):
    """The engine, slowed down by ``delay_s`` per inference; records resets."""

    def __init__(self, policy, delay_s):
        super().__init__(policy)
        self._delay_s = delay_s
        self.resets = []

    def infer(self, observation):
        time.sleep(self._delay_s)
        return super().infer(observation)

    def reset(self, session_id='default'):
        self.resets.append(session_id)
        super().reset(session_id)


def _observation(frames, index, session_id='default', prompt='put the marker in the cup'):
    return Observation(
        images={camera: clip[index] for camera, clip in frames.items()},
        joint_position=np.linspace(-0.4, 0.4, 7) + 0.01 * index,
        gripper_position=np.array([0.3]),
        prompt=prompt,
        session_id=session_id,
    )


def test_reference_client_protocol(server):
    out = run_openpi([CHECK, '--port', str(server.port), 'protocol'])
    assert out['metadata'] == CLIENT_CONFIG
    first, second = out['infer']
    for reply in (*out['infer'], out['after_reset'], out['after_error'], out['reconnect']):
        assert reply['type'] == 'dict' and reply['dtype'] == '<f4' and reply['finite']
        assert reply['shape'][1] == 8 and reply['shape'][0] >= 8
    assert first['server_timing'] == ['infer_ms', 'queue_ms']
    assert second['server_timing'] == ['infer_ms', 'prev_total_ms', 'queue_ms']
    # Chunk counters: per session, restarted by reset, by a new connection, and for a
    # connection's session-less requests.
    assert [first['chunk_id'], second['chunk_id'], out['after_reset']['chunk_id']] == [0, 1, 0]
    assert out['after_error']['chunk_id'] == 1
    assert out['no_session']['chunk_id'] == 0
    assert out['one_exterior_camera']['finite'] and out['one_exterior_camera']['chunk_id'] == 0
    assert out['reconnect']['chunk_id'] == 0 and out['reconnect_metadata_equal']
    # openpi-client's infer({"endpoint": "reset"}) decodes the reset reply.
    assert out['reset']['keys'] == ['reset', 'session_id', 'status']
    assert out['reset']['status'] == 'reset successful'
    for error, needle in (
        (out['missing_camera'], 'wrist_image_left'),
        (out['nan_state'], 'finite'),
    ):
        assert error['raised'] == 'RuntimeError'
        body = json.loads(error['message'].split('\n', 1)[1])
        assert body['error'] == 'ObservationError' and needle in body['message']
        assert 'Traceback' not in error['message']
    assert out['roboarena'] == {'type': 'ndarray', 'shape': first['shape'], 'dtype': '<f4'}


def test_reference_client_raises_on_oversized_payload(server):
    out = run_openpi([CHECK, '--port', str(server.port), '--oversize-mb', '6', 'oversized'])
    assert out['oversized']['raised'] == 'ConnectionClosedError'
    assert '1009' in out['oversized']['message'] and out['oversized']['seconds'] < 10
    assert out['fresh_connection_metadata_equal']


def test_reference_client_sees_failures_without_device_or_process_details(engine):
    handle = OpenPIServer(FailingPolicy(engine), ServerConfig(port=0)).start()
    try:
        out_of_memory = run_openpi([CHECK, '--port', str(handle.port), 'internal-error'])
        crash = run_openpi(
            [CHECK, '--port', str(handle.port), '--fail-prompt', 'crash now', 'internal-error']
        )
    finally:
        handle.stop()
    # A failure inside inference: the client learns that it failed, not where or why.
    failing = out_of_memory['failing']
    body = json.loads(failing['message'].split('\n', 1)[1])
    assert body['error'] == 'PolicyError' and 'inference failed' in body['message']
    for detail in ('CUDA', 'GPU', 'GiB', 'Process', '4242', 'Traceback'):
        assert detail not in failing['message']
    assert out_of_memory['next_call']['raised'] is None  # the connection stays usable
    # An unexpected exception: InternalError, then the connection is closed (1011).
    failing = crash['failing']
    assert failing['raised'] == 'RuntimeError' and 'InternalError' in failing['message']
    assert 'secret' not in failing['message'] and 'Traceback' not in failing['message']
    assert crash['next_call']['raised'] == 'ConnectionClosedError'
    assert '1011' in crash['next_call']['message']
    assert crash['fresh_connection_metadata_equal']


def test_api_key_is_required_when_set(engine):
    handle = OpenPIServer(engine, ServerConfig(port=0, api_key='s3cret')).start()
    try:
        assert healthz(handle.port) == (200, b'OK\n')
        out = run_openpi([CHECK, '--port', str(handle.port), '--api-key', 's3cret', 'api-key'])
    finally:
        handle.stop()
    for refused in (out['without_key'], out['wrong_key']):
        assert refused['raised'] == 'InvalidStatus' and '401' in refused['message']
    assert out['with_key_metadata'] == CLIENT_CONFIG


def test_malformed_requests_get_error_replies_and_the_connection_survives(server):
    object_array = msgpack_numpy.msgpack.packb(
        {'x': {b'__ndarray__': True, b'data': b'\0' * 8, b'dtype': '|O', b'shape': [1]}}
    )
    frames = droid_frames(1)
    wide_pixels = droid_request(frames, 0)
    wide_pixels['observation/wrist_image_left'] = np.full((180, 320, 3), 300, np.int16)
    cases = [
        (b'\xc1\x00garbage', 'MalformedRequest', 'malformed msgpack'),
        ('{"prompt": "text frame"}', 'MalformedRequest', 'text frame'),
        (msgpack_numpy.packb([1, 2, 3]), 'MalformedRequest', 'must be a map'),
        (object_array, 'MalformedRequest', 'unsupported dtype'),
        (msgpack_numpy.packb({'endpoint': 'train'}), 'ObservationError', 'unknown endpoint'),
        (msgpack_numpy.packb({'session_id': 'x' * 300}), 'ObservationError', 'session_id'),
        (msgpack_numpy.packb(wide_pixels), 'ObservationError', 'outside [0, 255]'),
    ]
    with connect(server.url, compression=None, max_size=None) as ws:
        assert msgpack_numpy.unpackb(ws.recv(timeout=10)) == CLIENT_CONFIG
        for message, kind, needle in cases:
            ws.send(message)
            reply = ws.recv(timeout=30)
            assert isinstance(reply, str), kind
            body = json.loads(reply)
            assert body['error'] == kind and needle in body['message'], body
        ws.send(msgpack_numpy.packb(droid_request(frames, 0)))
        reply = msgpack_numpy.unpackb(ws.recv(timeout=60))
    assert reply['actions'].dtype == np.float32 and reply['chunk_id'] == 0


def test_two_reference_clients_at_once_keep_their_sessions_apart(server, frames_npz):
    args = [LOOP, '--port', str(server.port), '--steps', '16', '--frames', frames_npz]
    args += ['--session-id', 'shared', '--image-size', '224x224']
    env = {**os.environ, 'PYTHONPATH': ''}
    processes = [
        subprocess.Popen(
            [openpi_python(), *args], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [json.loads(process.communicate(timeout=300)[0]) for process in processes]
    assert all(process.returncode == 0 for process in processes)
    for out in outputs:
        # Same session id, but one session per connection: each counts its own chunks.
        assert out['queries'] == 2 and out['chunk_ids'] == [0, 1]
    # Identical inputs on isolated sessions give identical actions.
    assert outputs[0]['final_joint_position'] == outputs[1]['final_joint_position']


def test_pings_health_and_new_clients_are_served_during_slow_inference(engine):
    delay_s = 3.0 * load_factor()  # the checks during it take longer on a loaded machine
    policy = SlowPolicy(engine, delay_s=delay_s)
    config = ServerConfig(port=0, ping_interval_s=0.5, ping_timeout_s=0.5)
    handle = OpenPIServer(policy, config).start()
    frames = droid_frames(1)
    try:
        with connect(handle.url, compression=None, max_size=None) as ws:
            ws.recv(timeout=10)
            start = time.monotonic()
            ws.send(msgpack_numpy.packb(droid_request(frames, 0, session_id='slow')))
            time.sleep(0.5)
            pong = ws.ping()
            assert pong.wait(timeout=1.0), 'ping not answered during inference'
            assert healthz(handle.port) == (200, b'OK\n')
            with connect(handle.url, compression=None) as other:
                assert msgpack_numpy.unpackb(other.recv(timeout=1.0)) == CLIENT_CONFIG
            assert time.monotonic() - start < delay_s - 0.5, 'served only after the inference'
            reply = msgpack_numpy.unpackb(ws.recv(timeout=60))
            assert time.monotonic() - start >= delay_s
            assert reply['actions'].shape[1] == 8
        deadline = time.monotonic() + 10
        while not policy.resets and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(policy.resets) == 1 and policy.resets[0].endswith('/slow')
    finally:
        handle.stop()


def test_remote_policy_gives_the_engines_actions(server, engine):
    frames = droid_frames(2)
    with RemoteOpenPIPolicy(server.url) as remote:
        assert dict(remote.metadata) == CLIENT_CONFIG
        chunks = [remote.infer(_observation(frames, i, 'remote')) for i in range(2)]
        remote.reset('remote')
        after_reset = remote.infer(_observation(frames, 0, 'remote'))
    local = [engine.infer(_observation(frames, i, 'local-reference')) for i in range(2)]
    engine.reset('local-reference')
    assert [chunk.chunk_id for chunk in chunks] == [0, 1] and after_reset.chunk_id == 0
    for remote_chunk, local_chunk in zip(chunks, local, strict=True):
        assert remote_chunk.actions.dtype == np.float32
        np.testing.assert_allclose(remote_chunk.actions, local_chunk.actions, atol=1e-5)
        assert {'round_trip', 'server_infer'} <= set(remote_chunk.timing_ms)
    np.testing.assert_allclose(after_reset.actions, chunks[0].actions, atol=1e-5)
    # RoboArena naming reaches the same cameras (and gets RoboArena's bare-array reply).
    with RemoteOpenPIPolicy(server.url, key_set='roboarena') as arena:
        np.testing.assert_allclose(
            arena.infer(_observation(frames, 0, 'arena')).actions, chunks[0].actions, atol=1e-5
        )


def test_remote_policy_reports_errors_and_reconnects(engine):
    handle = OpenPIServer(engine, ServerConfig(port=0)).start()
    port = handle.port
    frames = droid_frames(1)
    remote = RemoteOpenPIPolicy(handle.url, connect_timeout_s=5)
    try:
        missing = _observation(frames, 0)
        missing = Observation(**{**missing.__dict__, 'images': {}})
        with pytest.raises(ObservationError, match='missing camera'):
            remote.infer(missing)
        with pytest.raises(ObservationError, match='session_id'):
            remote.infer(_observation(frames, 0, session_id='x' * 300))
        assert remote.infer(_observation(frames, 0)).chunk_id == 0
        handle.stop()
        with pytest.raises(PolicyError, match='connection lost|cannot connect'):
            remote.infer(_observation(frames, 0))
        handle = OpenPIServer(engine, ServerConfig(port=port)).start()
        assert remote.infer(_observation(frames, 0)).chunk_id == 0
    finally:
        remote.close()
        handle.stop()
    with pytest.raises(PolicyError, match='cannot connect'):
        RemoteOpenPIPolicy(f'127.0.0.1:{port}', connect_timeout_s=2)


@pytest.mark.parametrize(
    ('image_size', 'external_cameras'),
    [('224x224', '1'), ('180x320', '2')],
    ids=['sim-evals-224x224-one-exterior', 'droid-180x320-two-exterior'],
)
def test_sim_evals_like_loop_runs_at_15_hz(server, frames_npz, image_size, external_cameras):
    out = run_openpi(
        [LOOP, '--port', str(server.port), '--steps', '16', '--frames', frames_npz]
        + ['--image-size', image_size, '--external-cameras', external_cameras],
        timeout=300,
    )
    assert out['queries'] == 2 and out['chunk_ids'] == [0, 1]
    assert min(out['horizons']) >= 8
    assert out['elapsed_s'] >= 15 / 15
    assert all(np.isfinite(out['final_joint_position']))


def test_console_script_serves_a_preset_with_a_key_from_a_file_until_sigterm(frames_npz, tmp_path):
    key_file = tmp_path / 'openpi.key'
    key_file.write_text('file-s3cret\n')
    command = [installed_script('dreamzero-openpi-server')]
    command += ['--preset', 'tiny', '--device', 'cpu', '--num-threads', '1', '--port', '0']
    command += ['--api-key-file', str(key_file), '--max-sessions', '2']
    env = {k: v for k, v in os.environ.items() if k != API_KEY_ENV}
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    try:
        port = None
        log = []
        deadline = time.monotonic() + 240
        while port is None and time.monotonic() < deadline:
            line = server.stderr.readline()
            if not line:
                break
            log.append(line)
            match = re.search(r'listening on ws://127\.0\.0\.1:(\d+)', line)
            port = int(match.group(1)) if match else None
        assert port is not None, ''.join(log)
        assert any('capacity: 2 sessions' in line for line in log), ''.join(log)
        threading.Thread(target=server.stderr.read, daemon=True).start()
        # The key is nowhere in the process list.
        assert b'file-s3cret' not in Path(f'/proc/{server.pid}/cmdline').read_bytes()
        assert healthz(port) == (200, b'OK\n')
        out = run_openpi(
            [LOOP, '--port', str(port), '--steps', '8', '--frames', frames_npz]
            + ['--api-key', 'file-s3cret']
        )
        assert out['queries'] == 1 and out['metadata'] == CLIENT_CONFIG
        keys = run_openpi([CHECK, '--port', str(port), '--api-key', 'file-s3cret', 'api-key'])
        assert '401' in keys['without_key']['message'] and '401' in keys['wrong_key']['message']
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
    finally:
        if server.poll() is None:
            server.kill()


def test_api_key_comes_from_a_file_or_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(API_KEY_ENV, 'from-env')
    assert read_api_key(None) == 'from-env'
    key_file = tmp_path / 'key'
    key_file.write_text('  from-file  \nignored\n')
    assert read_api_key(key_file) == 'from-file'
    key_file.write_text('\n')
    with pytest.raises(ValueError, match='is empty'):
        read_api_key(key_file)
    with pytest.raises(ValueError, match='cannot read'):
        read_api_key(tmp_path / 'missing')
    monkeypatch.delenv(API_KEY_ENV)
    assert read_api_key(None) is None
    # There is no way to pass the key itself on the command line.
    with pytest.raises(SystemExit):
        build_parser().parse_args(['--preset', 'tiny', '--api-key', 'visible'])


UPSTREAM_SERVER = """
import importlib.util, sys
import numpy as np
spec = importlib.util.spec_from_file_location('policy_server', sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)

class Policy(module.BasePolicy):
    def infer(self, obs):
        assert 'observation/exterior_image_0_left' in obs, sorted(obs)
        return np.full((1, 8), 0.5, dtype=np.float32)

    def reset(self, reset_info):
        pass

config = module.PolicyServerConfig(image_resolution=(180, 320), n_external_cameras=2)
server = module.WebsocketPolicyServer(Policy(), config, host='127.0.0.1', port=int(sys.argv[2]))
server.serve_forever()
"""


def _upstream_file(path: str, folder: Path) -> Path:
    """One file of the upstream DreamZero repository named by ``$DREAMZERO_UPSTREAM_REPO``.

    The variable names a checkout or a git directory; the file is run from the test's
    temporary folder, never copied into the project. Skips the test where it is not set.
    """
    location = os.environ.get(UPSTREAM_ENV)
    if not location:
        pytest.skip(f'set {UPSTREAM_ENV} to a checkout of dreamzero0/dreamzero to run this test')
    checkout = Path(location)
    if (checkout / path).is_file():
        source = (checkout / path).read_bytes()
    else:
        source = subprocess.run(
            ['git', '--git-dir', str(checkout), 'show', f'HEAD:{path}'],
            capture_output=True,
            check=True,
        ).stdout
    target = folder / Path(path).name
    target.write_bytes(source)
    return target


UPSTREAM_CLIENT = """
import importlib.util, json, sys, uuid
import numpy as np

def load(path):
    spec = importlib.util.spec_from_file_location(path.rsplit('/', 1)[-1][:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

server_module, client_module = load(sys.argv[1]), load(sys.argv[2])
client = client_module.WebsocketClientPolicy(host='127.0.0.1', port=int(sys.argv[3]))
config = server_module.PolicyServerConfig(**client.get_server_metadata())
rng = np.random.default_rng(0)
obs = {f'observation/{name}': rng.integers(0, 256, (4, 180, 320, 3), dtype=np.uint8)
       for name in ('exterior_image_0_left', 'exterior_image_1_left', 'wrist_image_left')}
obs.update({'observation/joint_position': np.zeros(7, np.float32),
            'observation/cartesian_position': np.zeros(6, np.float32),
            'observation/gripper_position': np.zeros(1, np.float32),
            'prompt': 'wipe the pan', 'session_id': str(uuid.uuid4())})
actions = client.infer(obs)
reset_reply = client.reset({})
print(json.dumps({'n_external_cameras': config.n_external_cameras,
                  'image_resolution': list(config.image_resolution),
                  'type': type(actions).__name__, 'shape': list(actions.shape),
                  'reset_reply_binary': isinstance(reset_reply, bytes)}))
"""


def test_upstream_dreamzero_roboarena_client_runs_against_our_server(server, tmp_path):
    server_file = _upstream_file('eval_utils/policy_server.py', tmp_path)
    client_file = _upstream_file('eval_utils/policy_client.py', tmp_path)
    out = run_openpi(['-c', UPSTREAM_CLIENT, str(server_file), str(client_file), str(server.port)])
    assert out['n_external_cameras'] == 2 and out['image_resolution'] == [180, 320]
    assert out['type'] == 'ndarray' and out['shape'][1] == 8
    assert out['reset_reply_binary']


def test_remote_policy_talks_to_upstream_dreamzero_roboarena_server(tmp_path):
    server_file = _upstream_file('eval_utils/policy_server.py', tmp_path)
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [openpi_python(), '-c', UPSTREAM_SERVER, str(server_file), str(port)],
        env={'PYTHONPATH': ''},
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                remote = RemoteOpenPIPolicy(f'127.0.0.1:{port}', key_set='roboarena')
                break
            except PolicyError:
                assert time.monotonic() < deadline and server.poll() is None, 'no upstream server'
                time.sleep(0.2)
        with remote:
            assert remote.metadata['n_external_cameras'] == 2
            chunk = remote.infer(_observation(droid_frames(1), 0, 'upstream'))
            remote.reset('upstream')  # upstream acknowledges with a text frame
        assert chunk.actions.shape == (1, 8) and np.all(chunk.actions == 0.5)
    finally:
        server.kill()
        server.wait()
