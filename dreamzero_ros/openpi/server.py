# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""OpenPI WebSocket server in front of any :class:`~dreamzero_ros.policy_types.Policy`.

Wire-compatible with ``openpi_client.WebsocketClientPolicy``, RoboArena's and upstream
DreamZero's clients and the seed integration's: metadata first, then lockstep msgpack-numpy
request/reply. The event loop only moves frames: requests are decoded and checked on a small
thread pool (within the message limits of its settings) and inference runs on one worker
thread, so keepalive pings, ``GET /healthz`` and new clients are answered while the
model works or a big frame is unpacked. Sessions are scoped to their connection and counted
against the capacity of :mod:`~dreamzero_ros.openpi.capacity`; a connection's sessions are
reset when it closes. Replies follow the convention of the client where it can be recognised
(see :class:`~dreamzero_ros.openpi.server_config.ServerConfig` ``reply_format``).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future, ThreadPoolExecutor
import dataclasses
import hmac
import http
import logging
import secrets
import signal
import threading
import time
from typing import Any

from websockets.asyncio.server import Request, Response, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode

from dreamzero_ros.errors import (
    CapacityError,
    MsgpackNumpyError,
    ObservationError,
    PolicyError,
    ProtocolError,
)
from dreamzero_ros.openpi import msgpack_numpy, observation_keys, protocol, session_budget
from dreamzero_ros.openpi.capacity import (
    Capacity,
    CapacityLimits,
    ClientLedger,
    Peer,
    RefusalThrottle,
)
from dreamzero_ros.openpi.heap_trim import HeapTrimmer
from dreamzero_ros.openpi.predicted_video import predicted_video_reply, wants_video
from dreamzero_ros.openpi.server_config import ServerConfig
from dreamzero_ros.policy_types import DROID_ACTION_DIM, ActionChunk, Observation, Policy

logger = logging.getLogger(__name__)

#: Threads that decode and check requests (images are resized there too).
DECODE_THREADS = 2


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
    """Per-connection protocol state."""

    websocket: ServerConnection
    peer: Peer
    seed_route: bool
    throttle: RefusalThrottle
    prev_total_ms: float | None = None
    #: The largest frame the connection may send next (its address's refusals lower it).
    allowance: int = 0

    def session_key(self, session_id: str | None) -> str:
        return f'openpi/{self.peer.number}/{session_id or ""}'


class OpenPIServer:
    """Serve a policy over the OpenPI WebSocket protocol.

    Args:
        policy: the policy to serve (the local engine, or anything implementing Policy).
        config: server settings.

    """

    def __init__(self, policy: Policy, config: ServerConfig | None = None) -> None:
        self._policy = policy
        self._config = config = config or ServerConfig()
        self._metadata = protocol.build_metadata(policy.metadata, config.metadata_extras)
        #: What DreamZero's own clients get: the metadata and what only they read.
        self._own_clients_metadata = dict(self._metadata)
        if config.random_weights:
            self._own_clients_metadata[protocol.RANDOM_WEIGHTS_KEY] = True
        self._cameras = observation_keys.required_cameras(self._metadata)
        #: The request keys of a policy for a robot other than DROID (None for DROID).
        self._embodiment = observation_keys.EmbodimentKeys.from_metadata(policy.metadata)
        self._action_dim = int(policy.metadata.get('action_dim', DROID_ACTION_DIM))
        resolution = self._metadata['image_resolution']
        self._image_size = None if resolution is None else (int(resolution[0]), int(resolution[1]))
        self._aspect = None
        if not config.detect_padding:
            self._aspect = config.camera_aspect or observation_keys.camera_aspect(policy.metadata)
        self._limits = config.decode_limits()
        self._capacity = Capacity(
            config.capacity_limits(
                session_budget.server_sessions(
                    policy, config.max_sessions, config.reserved_sessions
                )
            )
        )
        self._ledger = ClientLedger(config.refusal_limits())
        self._trimmer = HeapTrimmer()
        self._pending: dict[ServerConnection, Peer] = {}
        self._tasks: set[asyncio.Task] = set()
        self._worker: ThreadPoolExecutor | None = None
        self._decoder: ThreadPoolExecutor | None = None
        self._stop_future: asyncio.Future | None = None

    @property
    def metadata(self) -> dict[str, Any]:
        """The metadata map every connection receives first."""
        return dict(self._metadata)

    @property
    def capacity(self) -> CapacityLimits:
        """The connection and session caps in force."""
        return self._capacity.limits

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
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix='openpi-policy')
        self._decoder = ThreadPoolExecutor(DECODE_THREADS, thread_name_prefix='openpi-decode')
        try:
            async with serve(
                self._handle,
                config.host,
                config.port,
                compression=None,
                max_size=config.max_payload_bytes,
                max_queue=1,
                open_timeout=config.open_timeout_s,
                ping_interval=config.ping_interval_s,
                ping_timeout=config.ping_timeout_s,
                process_request=self._process_request,
            ) as server:
                port = server.sockets[0].getsockname()[1]
                limits = self._capacity.limits
                logger.info(
                    'capacity: %d sessions (%d per client address, %d per connection), '
                    '%d connections (%d per client address); idle connections evictable '
                    'after %g s',
                    limits.max_sessions,
                    limits.max_sessions_per_client,
                    limits.max_sessions_per_connection,
                    limits.max_connections,
                    limits.max_connections_per_client,
                    limits.idle_evict_after_s,
                )
                logger.info('OpenPI server listening on ws://%s:%d', config.host, port)
                on_bound(port)
                trimming = loop.create_task(self._trim_after_refusals())
                try:
                    await self._stop_future
                finally:
                    trimming.cancel()
        finally:
            self._decoder.shutdown(wait=False, cancel_futures=True)
            self._worker.shutdown(wait=False, cancel_futures=True)
            logger.info('OpenPI server stopped')

    async def _trim_after_refusals(self) -> None:
        """Give the memory of large refused requests back once they have stopped."""
        while True:
            await asyncio.sleep(1.0)
            if self._trimmer.due:
                await self._in_decoder(self._trimmer.trim)

    # ------------------------------------------------------------------ connections
    async def _process_request(
        self, connection: ServerConnection, request: Request
    ) -> Response | None:
        if request.path == '/healthz':
            return connection.respond(http.HTTPStatus.OK, 'OK\n')
        address = str(connection.remote_address[0]) if connection.remote_address else '?'
        if self._config.api_key is not None:
            sent = request.headers.get('Authorization', '')
            if not hmac.compare_digest(sent.encode(), f'Api-Key {self._config.api_key}'.encode()):
                logger.warning('refused %s: missing or wrong API key', address)
                return connection.respond(
                    http.HTTPStatus.UNAUTHORIZED, 'missing or wrong API key\n'
                )
        refusal = self._ledger.handshake_refusal(address)
        if refusal is not None:
            logger.info('refused a connection: %s', refusal)
            return connection.respond(http.HTTPStatus.TOO_MANY_REQUESTS, f'{refusal}\n')
        try:
            peer, evicted = self._capacity.admit(address, self._ledger.abusive)
        except CapacityError as error:
            logger.warning('refused a connection from %s: %s', address, error)
            return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE, f'{error}\n')
        for victim in evicted:
            self._evict(victim, f'a new client from {address} needed its connection slot')
        self._pending = {
            conn: pending
            for conn, pending in self._pending.items()
            if self._capacity.counts(pending)
        }
        self._pending[connection] = peer
        return None

    async def _handle(self, websocket: ServerConnection) -> None:
        peer = self._pending.pop(websocket, None)
        if peer is None or not self._capacity.counts(peer):
            await websocket.close(CloseCode.TRY_AGAIN_LATER, 'handshake took too long')
            return
        state = _Connection(
            websocket,
            peer,
            seed_route=websocket.request.path == protocol.SEED_ROUTE,
            throttle=self._ledger.of(peer.address),
        )
        self._capacity.attach(peer, state)
        logger.info(
            'connection %d from %s opened (path %s)',
            peer.number,
            websocket.remote_address,
            protocol.preview(websocket.request.path),
        )
        try:
            self._limit_frames(state)
            own_client = protocol.CLIENT_HEADER in websocket.request.headers
            metadata = self._own_clients_metadata if own_client else self._metadata
            await websocket.send(msgpack_numpy.packb(metadata))
            while await self._serve_one(state):
                pass
        except ConnectionClosed:
            sent = getattr(websocket.protocol, 'close_sent', None)
            if sent is not None and sent.code == CloseCode.MESSAGE_TOO_BIG:
                state.throttle.refused(state.allowance)  # refused from its header
                self._trimmer.note(state.allowance)
        finally:
            keys = self._capacity.release(peer)
            logger.info('connection %d closed', peer.number)
            if state.throttle.consecutive:  # its last frames were refused: trim once it is gone
                self._trimmer.note(state.allowance)
            if keys:
                try:
                    await self._in_worker(self._reset_sessions, keys)
                except Exception:
                    logger.exception('connection %d: resetting its sessions failed', peer.number)

    def _evict(self, victim: Peer, why: str) -> None:
        """Close ``victim`` to make room; reset its sessions before any later inference."""
        keys = self._capacity.release(victim)
        state: _Connection = victim.handle
        idle_s = victim.idle_s(time.monotonic())
        logger.warning(
            'evicting connection %d from %s (idle %.0f s, %d sessions): %s',
            victim.number,
            victim.address,
            idle_s,
            len(keys),
            why,
        )
        self._submit_reset(keys)
        reason = f'evicted after {idle_s:.0f} s idle: {why}'
        task = asyncio.get_running_loop().create_task(
            state.websocket.close(CloseCode.TRY_AGAIN_LATER, reason[:120])
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ requests
    async def _serve_one(self, state: _Connection) -> bool:
        """Answer one request; False once the connection is to end."""
        delay = state.throttle.wait_s()
        if delay > 0:  # refused too often: its next frame waits in its own TCP window
            try:  # unless the connection ends meanwhile
                await asyncio.wait_for(state.websocket.wait_closed(), delay)
            except asyncio.TimeoutError:
                pass
        self._limit_frames(state)
        message = await state.websocket.recv()
        self._capacity.started(state.peer)
        try:
            return await self._answer(state, message)
        finally:
            self._capacity.finished(state.peer)

    async def _answer(self, state: _Connection, message: bytes | str) -> bool:
        received = time.monotonic()
        endpoint = None
        number = state.peer.number
        try:
            protocol.check_request_header(message)
            request = await self._in_decoder(self._parse, message)
            endpoint = protocol.endpoint_of(request)
            session_id = protocol.session_id_of(request)
            if endpoint == protocol.RESET:
                reply = await self._reset(state, session_id)
            else:
                reply = await self._infer(state, request, session_id)
        except CapacityError as error:
            kind, text = 'ServerBusy', str(error)
        except ProtocolError as error:
            kind, text = 'MalformedRequest', str(error)
        except ObservationError as error:
            kind, text = 'ObservationError', str(error)
        except PolicyError as error:
            incident = secrets.token_hex(4)
            logger.error(
                'connection %d: inference failed (incident %s): %s',
                number,
                incident,
                protocol.truncate(str(error), self._config.max_error_chars),
            )
            kind = 'PolicyError'
            text = f'inference failed (incident {incident}); the session was reset'
        except Exception:
            logger.exception('connection %d: internal error', number)
            await state.websocket.send(
                protocol.error_text(
                    'InternalError', 'internal server error; see the server log', endpoint
                )
            )
            await state.websocket.close(CloseCode.INTERNAL_ERROR, 'internal server error')
            return False
        else:
            await state.websocket.send(reply)
            state.prev_total_ms = (time.monotonic() - received) * 1000.0
            state.throttle.served()
            return True
        limit = self._config.max_error_chars
        logger.info('connection %d: %s: %s', number, kind, protocol.truncate(text, limit))
        refused = kind in ('MalformedRequest', 'ObservationError')
        if refused:
            state.throttle.refused(len(message))
            self._trimmer.note(len(message))
            self._limit_frames(state)
        await state.websocket.send(protocol.error_text(kind, text, endpoint, limit))
        if refused:
            if state.throttle.exhausted:
                count = state.throttle.consecutive
                logger.warning('connection %d closed: %d requests in a row refused', number, count)
                await state.websocket.close(
                    CloseCode.POLICY_VIOLATION, f'{count} requests in a row refused'
                )
                return False
        return True

    def _limit_frames(self, state: _Connection) -> None:
        """Refuse the connection's next frames over its address's allowance from their header.

        Called before each read and before each reply (a client in lockstep sends its next
        frame only once it has the reply, so that frame's header meets the allowance in force).
        """
        connections = self._capacity.connections_of(state.peer.address)
        cap = self._config.max_payload_bytes
        state.allowance = state.throttle.frame_allowance(cap, connections)
        protocol = state.websocket.protocol
        if hasattr(protocol, 'max_message_size'):  # websockets >= 14
            protocol.max_message_size = state.allowance
        else:
            protocol.max_size = state.allowance

    def _parse(self, message: bytes) -> dict[str, Any]:
        """The request map of one frame (on a decoder thread; its header checked already)."""
        try:
            request = msgpack_numpy.unpackb(message, self._limits)
        except MsgpackNumpyError as error:
            raise ProtocolError(str(error)) from error
        if not isinstance(request, dict):
            raise ProtocolError(f'a request must be a map, got {type(request).__name__}')
        return request

    def _observation(self, request: dict[str, Any], key: str) -> tuple[Observation, Any]:
        """The request's observation and key set (on a decoder thread)."""
        if self._embodiment is not None:
            observation = observation_keys.embodiment_request_to_observation(
                request,
                self._embodiment,
                detect_padding=self._config.detect_padding,
                max_prompt_chars=self._config.max_prompt_chars,
                session_id=key,
                stamp=time.time(),
            )
            return observation, observation_keys.KeySet.EMBODIMENT
        return observation_keys.request_to_observation(
            request,
            self._cameras,
            self._image_size,
            source_aspect=self._aspect,
            fill_missing_exterior=self._config.fill_missing_exterior,
            max_prompt_chars=self._config.max_prompt_chars,
            session_id=key,
            stamp=time.time(),
        )

    async def _reset(self, state: _Connection, session_id: str | None) -> bytes | str:
        if session_id is not None:
            keys = [state.session_key(session_id)]
        else:
            keys = list(state.peer.sessions)
        self._capacity.drop_sessions(state.peer, keys)
        await self._in_worker(self._reset_sessions, keys)
        return protocol.reset_reply(session_id, as_text=state.seed_route)

    async def _infer(
        self, state: _Connection, request: dict[str, Any], session_id: str | None
    ) -> bytes:
        return_video = wants_video(request, self._policy)
        key = state.session_key(session_id)
        observation, key_set = await self._in_decoder(self._observation, request, key)
        claim = self._capacity.claim_session(state.peer, key)
        if claim.ended:
            logger.info(
                'connection %d: session %s ended: the connection started %s',
                state.peer.number,
                protocol.preview(claim.ended[0]),
                protocol.preview(key),
            )
            self._submit_reset(claim.ended)
        for victim in claim.evicted:
            self._evict(victim, f'connection {state.peer.number} needed a session')
        queued = time.monotonic()
        chunk, infer_ms = await self._in_worker(self._run_policy, observation, return_video)
        actions = protocol.checked_actions(chunk, self._action_dim)
        if self._array_reply(state, key_set):
            return msgpack_numpy.packb(actions)
        timing = {
            'infer_ms': infer_ms,
            'queue_ms': max(0.0, (time.monotonic() - queued) * 1000.0 - infer_ms),
        }
        if state.prev_total_ms is not None:
            timing['prev_total_ms'] = state.prev_total_ms
        reply = {'actions': actions, 'server_timing': timing, 'chunk_id': chunk.chunk_id}
        if return_video:
            reply['predicted_video'] = await self._in_worker(predicted_video_reply, chunk)
        return msgpack_numpy.packb(reply)

    def _array_reply(self, state: _Connection, key_set: observation_keys.KeySet) -> bool:
        reply_format = self._config.reply_format
        if reply_format != 'auto':
            return reply_format == 'array'
        return state.seed_route or key_set is observation_keys.KeySet.ROBOARENA

    # ------------------------------------------------------------------ threads
    async def _in_worker(self, function: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._worker, function, *args)

    async def _in_decoder(self, function: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._decoder, function, *args)

    def _submit_reset(self, keys: list[str]) -> None:
        """Reset ``keys`` on the worker, ahead of any inference queued after this call."""
        if keys:
            self._worker.submit(self._reset_sessions, keys).add_done_callback(_log_failure)

    def _run_policy(
        self, observation: Observation, return_video: bool = False
    ) -> tuple[ActionChunk, float]:
        start = time.monotonic()
        options = {'predicted_video': True} if return_video else {}
        chunk = self._policy.infer(observation, **options)
        return chunk, (time.monotonic() - start) * 1000.0

    def _reset_sessions(self, keys: list[str]) -> None:
        for key in keys:
            self._policy.reset(key)


def _log_failure(future: Future) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.error('resetting sessions failed: %s', future.exception())
