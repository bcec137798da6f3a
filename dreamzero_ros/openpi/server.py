# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""OpenPI WebSocket server in front of any :class:`~dreamzero_ros.policy_types.Policy`.

Wire-compatible with ``openpi_client.WebsocketClientPolicy`` and the RoboArena client: metadata
first, then lockstep msgpack-numpy request/reply. Inference runs on one worker thread, so the
event loop keeps answering keepalive pings, ``GET /healthz`` and other clients while the model
works; requests of several clients queue for that thread. Sessions are scoped to their
connection: a client's ``session_id`` (or its absence) names a session inside its connection,
and a connection's sessions are reset when it closes.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
import dataclasses
import hmac
import http
import itertools
import logging
import signal
import threading
import time
from typing import Any

import numpy as np
from websockets.asyncio.server import Request, Response, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode

from dreamzero_ros.errors import MsgpackNumpyError, PolicyError, ProtocolError
from dreamzero_ros.openpi import msgpack_numpy, observation_keys, protocol
from dreamzero_ros.policy_types import DROID_ACTION_DIM, ActionChunk, Policy

logger = logging.getLogger(__name__)

REPLY_FORMATS = ('auto', 'dict', 'array')
#: Connection numbers, unique in the process, so that servers sharing one policy never share a
#: session key.
_CONNECTION_NUMBERS = itertools.count(1)


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    """Settings of :class:`OpenPIServer`; the defaults are the safe ones.

    Attributes:
        host: interface to bind; loopback unless told otherwise (``0.0.0.0`` for all).
        port: TCP port; 0 picks a free one.
        api_key: if set, a client must send ``Authorization: Api-Key <api_key>``.
        max_payload_bytes: largest request accepted; bigger ones close the connection (1009)
            before anything is unpacked.
        idle_timeout_s: close a connection that sends nothing for this long; None never.
        max_connections: refuse further WebSocket handshakes (HTTP 503) beyond this many.
        ping_interval_s: keepalive ping period; None disables pings.
        ping_timeout_s: close a connection whose pong is this late.
        metadata_extras: send the policy's extra metadata (horizon, rate) besides the six
            client-configuration fields; RoboArena clients reject unknown keys.
        reply_format: ``dict`` replies ``{"actions", "server_timing", ...}`` (openpi-client,
            DROID, sim-evals); ``array`` replies the bare ``(H, 8)`` array (RoboArena);
            ``auto`` answers each request in the format of its key set.
        camera_aspect: width / height of the clients' cameras, to undo ``resize_with_pad``
            exactly; None detects the black bands.
        fill_missing_exterior: serve requests with one exterior camera (DROID main loop,
            sim-evals) by giving the other a black frame, a dropped view as in training;
            False refuses them.

    """

    host: str = '127.0.0.1'
    port: int = 8000
    api_key: str | None = None
    max_payload_bytes: int = 16 * 2**20
    idle_timeout_s: float | None = 600.0
    max_connections: int = 8
    ping_interval_s: float | None = 20.0
    ping_timeout_s: float | None = 20.0
    metadata_extras: bool = False
    reply_format: str = 'auto'
    camera_aspect: float | None = None
    fill_missing_exterior: bool = True

    def __post_init__(self) -> None:
        if self.reply_format not in REPLY_FORMATS:
            raise ValueError(
                f'reply_format must be one of {REPLY_FORMATS}, got {self.reply_format!r}'
            )
        if self.max_payload_bytes < 1024 or self.max_connections < 1:
            raise ValueError('max_payload_bytes must be >= 1024 and max_connections >= 1')


@dataclasses.dataclass
class ServerHandle:
    """A server running on a background thread."""

    host: str
    port: int
    _stop: Any
    _thread: threading.Thread

    @property
    def url(self) -> str:
        """``ws://host:port`` of the server."""
        return f'ws://{self.host}:{self.port}'

    def stop(self, timeout_s: float = 30.0) -> None:
        """Close every connection and the listening socket; wait for the thread to end."""
        self._stop()
        self._thread.join(timeout_s)


@dataclasses.dataclass
class _Connection:
    """Per-connection state."""

    number: int
    sessions: set[str] = dataclasses.field(default_factory=set)
    prev_total_ms: float | None = None

    def session_key(self, session_id: str | None) -> str:
        return f'openpi/{self.number}/{session_id or ""}'


class OpenPIServer:
    """Serve a policy over the OpenPI WebSocket protocol.

    Args:
        policy: the policy to serve (the local engine, or anything implementing Policy).
        config: server settings.

    """

    def __init__(self, policy: Policy, config: ServerConfig | None = None) -> None:
        self._policy = policy
        self._config = config or ServerConfig()
        self._metadata = protocol.build_metadata(policy.metadata, self._config.metadata_extras)
        self._cameras = observation_keys.required_cameras(self._metadata)
        resolution = self._metadata['image_resolution']
        self._image_size = None if resolution is None else (int(resolution[0]), int(resolution[1]))
        self._open = 0
        self._executor: ThreadPoolExecutor | None = None
        self._stop_future: asyncio.Future | None = None

    @property
    def metadata(self) -> dict[str, Any]:
        """The metadata map every connection receives first."""
        return dict(self._metadata)

    def serve_forever(self) -> None:
        """Serve on this thread; on the main thread SIGINT/SIGTERM stop it cleanly."""
        asyncio.run(self._serve(lambda port: None, handle_signals=True))

    def start(self, timeout_s: float = 30.0) -> ServerHandle:
        """Serve on a background thread; returns once the socket is bound."""
        bound = threading.Event()
        result: dict[str, Any] = {}

        def on_bound(port: int) -> None:
            result['port'] = port
            bound.set()

        def run() -> None:
            try:
                asyncio.run(self._serve(on_bound, handle_signals=False))
            except BaseException as error:  # noqa: BLE001 - reported to start()'s caller
                result['error'] = error
                bound.set()

        thread = threading.Thread(target=run, name='openpi-server', daemon=True)
        thread.start()
        if not bound.wait(timeout_s):
            raise TimeoutError(f'OpenPI server did not bind within {timeout_s} s')
        if 'error' in result:
            raise result['error']
        return ServerHandle(self._config.host, result['port'], self._request_stop, thread)

    def _request_stop(self) -> None:
        future = self._stop_future
        if future is not None and not future.done():
            future.get_loop().call_soon_threadsafe(lambda: future.done() or future.set_result(None))

    async def _serve(self, on_bound: Any, handle_signals: bool) -> None:
        config = self._config
        loop = asyncio.get_running_loop()
        self._stop_future = loop.create_future()
        if handle_signals and threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, self._request_stop)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix='openpi-policy')
        try:
            async with serve(
                self._handle,
                config.host,
                config.port,
                compression=None,
                max_size=config.max_payload_bytes,
                max_queue=4,
                ping_interval=config.ping_interval_s,
                ping_timeout=config.ping_timeout_s,
                process_request=self._process_request,
            ) as server:
                port = server.sockets[0].getsockname()[1]
                logger.info('OpenPI server listening on ws://%s:%d', config.host, port)
                on_bound(port)
                await self._stop_future
        finally:
            self._executor.shutdown(wait=False, cancel_futures=True)
            logger.info('OpenPI server stopped')

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        if request.path == '/healthz':
            return connection.respond(http.HTTPStatus.OK, 'OK\n')
        if self._config.api_key is not None:
            sent = request.headers.get('Authorization', '')
            if not hmac.compare_digest(sent.encode(), f'Api-Key {self._config.api_key}'.encode()):
                logger.warning('refused %s: missing or wrong API key', connection.remote_address)
                return connection.respond(
                    http.HTTPStatus.UNAUTHORIZED, 'missing or wrong API key\n'
                )
        if self._open >= self._config.max_connections:
            return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE, 'too many connections\n')
        return None

    async def _handle(self, websocket: ServerConnection) -> None:
        state = _Connection(next(_CONNECTION_NUMBERS))
        self._open += 1
        logger.info('connection %d from %s opened', state.number, websocket.remote_address)
        try:
            await websocket.send(msgpack_numpy.packb(self._metadata))
            while await self._serve_one(websocket, state):
                pass
        except ConnectionClosed:
            pass
        finally:
            self._open -= 1
            logger.info('connection %d closed', state.number)
            if state.sessions:
                try:
                    await self._run_in_worker(self._reset_sessions, sorted(state.sessions))
                except Exception:
                    logger.exception('connection %d: resetting its sessions failed', state.number)

    async def _serve_one(self, websocket: ServerConnection, state: _Connection) -> bool:
        """Answer one request; False once the connection is to end."""
        try:
            message = await asyncio.wait_for(websocket.recv(), self._config.idle_timeout_s)
        except TimeoutError:
            await websocket.close(CloseCode.NORMAL_CLOSURE, 'idle timeout')
            return False
        received = time.monotonic()
        endpoint = None
        try:
            request = self._decode(message)
            endpoint = protocol.endpoint_of(request)
            reply = await self._answer(request, endpoint, state)
        except PolicyError as error:
            kind = 'MalformedRequest' if isinstance(error, ProtocolError) else type(error).__name__
            logger.info('connection %d: %s: %s', state.number, kind, error)
            await websocket.send(protocol.error_text(kind, str(error), endpoint))
            return True
        except Exception:
            logger.exception('connection %d: internal error', state.number)
            await websocket.send(
                protocol.error_text(
                    'InternalError', 'internal server error; see the server log', endpoint
                )
            )
            await websocket.close(CloseCode.INTERNAL_ERROR, 'internal server error')
            return False
        await websocket.send(reply)
        state.prev_total_ms = (time.monotonic() - received) * 1000.0
        return True

    @staticmethod
    def _decode(message: bytes | str) -> dict[str, Any]:
        if isinstance(message, str):
            raise ProtocolError('requests must be binary msgpack frames, got a text frame')
        try:
            request = msgpack_numpy.unpackb(message)
        except MsgpackNumpyError as error:
            raise ProtocolError(str(error)) from error
        if not isinstance(request, dict):
            raise ProtocolError(f'a request must be a map, got {type(request).__name__}')
        return request

    async def _answer(self, request: dict[str, Any], endpoint: str, state: _Connection) -> bytes:
        session_id = protocol.session_id_of(request)
        if endpoint == protocol.RESET:
            keys = (
                [state.session_key(session_id)]
                if session_id is not None
                else sorted(state.sessions)
            )
            await self._run_in_worker(self._reset_sessions, keys)
            state.sessions.difference_update(keys)
            return msgpack_numpy.packb({'reset': True, protocol.SESSION_KEY: session_id})
        key = state.session_key(session_id)
        observation, key_set = observation_keys.request_to_observation(
            request,
            self._cameras,
            self._image_size,
            source_aspect=self._config.camera_aspect,
            fill_missing_exterior=self._config.fill_missing_exterior,
            session_id=key,
            stamp=time.time(),
        )
        state.sessions.add(key)
        queued = time.monotonic()
        chunk, infer_ms = await self._run_in_worker(self._infer, observation)
        actions = _checked_actions(chunk)
        reply_format = self._config.reply_format
        if reply_format == 'array' or (
            reply_format == 'auto' and key_set is observation_keys.KeySet.ROBOARENA
        ):
            return msgpack_numpy.packb(actions)
        timing = {
            'infer_ms': infer_ms,
            'queue_ms': max(0.0, (time.monotonic() - queued) * 1000.0 - infer_ms),
        }
        if state.prev_total_ms is not None:
            timing['prev_total_ms'] = state.prev_total_ms
        return msgpack_numpy.packb(
            {'actions': actions, 'server_timing': timing, 'chunk_id': chunk.chunk_id}
        )

    async def _run_in_worker(self, function: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)

    def _infer(self, observation: Any) -> tuple[ActionChunk, float]:
        start = time.monotonic()
        chunk = self._policy.infer(observation)
        return chunk, (time.monotonic() - start) * 1000.0

    def _reset_sessions(self, keys: list[str]) -> None:
        for key in keys:
            self._policy.reset(key)


def _checked_actions(chunk: ActionChunk) -> np.ndarray:
    """The chunk's actions as C-order float32, refusing anything a robot must not receive."""
    actions = np.ascontiguousarray(chunk.actions, dtype=np.float32)
    if actions.ndim != 2 or actions.shape[1] != DROID_ACTION_DIM or actions.shape[0] < 1:
        raise PolicyError(f'policy returned actions of shape {actions.shape}, expected (H, 8)')
    if not np.all(np.isfinite(actions)):
        raise PolicyError('policy returned non-finite actions')
    return actions
