# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A :class:`~dreamzero_ros.policy_types.Policy` served by a remote OpenPI server.

The ROS node uses it as its engine when ``engine.backend`` is ``remote``: observations go out
with the DROID keys (images ``resize_with_pad``-ed to the server's ``image_resolution``),
``session_id`` and ``endpoint``; replies come back as :class:`ActionChunk`. A lost connection
fails the call in hand with :class:`PolicyError` and is re-opened by the next call.
"""

from __future__ import annotations

from collections.abc import Mapping
import inspect
import threading
import time
from typing import Any

import numpy as np
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.protocol import State
from websockets.sync.client import ClientConnection, connect

from dreamzero_ros.closing import Closing
from dreamzero_ros.errors import MsgpackNumpyError, ServerConnectionError
from dreamzero_ros.openpi import msgpack_numpy, observation_keys, protocol
from dreamzero_ros.policy_types import (
    DROID_ACTION_DIM,
    DROID_CONTROL_HZ,
    ActionChunk,
    Observation,
    ObservationError,
    PolicyError,
)

#: What RoboArena servers send as the (text) reply to a reset.
RESET_ACKNOWLEDGEMENT_TEXT = 'reset successful'
#: Largest reply accepted from a server, bytes.
MAX_REPLY_BYTES = 16 * 2**20
#: websockets >= 17.1 wants ``legacy=True`` for a connection held outside a ``with`` block.
_DIRECT_CONNECTION = {'legacy': True} if 'legacy' in inspect.signature(connect).parameters else {}


def websocket_uri(text: str) -> str:
    """``ws://host:port`` from what a user types: ``ws://`` / ``wss://`` URLs or ``host:port``.

    Raises:
        ValueError: another scheme (``http://``: the server speaks WebSocket on the same port).

    """
    scheme, sep, rest = text.partition('://')
    if not sep:
        return f'ws://{text}'
    if scheme not in ('ws', 'wss') or not rest:
        raise ValueError(
            f'the server URL {text!r} must be ws://HOST:PORT or wss://HOST:PORT (or HOST:PORT)'
        )
    return text


class RemoteOpenPIPolicy(Closing):
    """Client side of the OpenPI protocol, implementing :class:`Policy`.

    Args:
        uri: ``ws://host:port`` (or ``host:port``) of the server.
        api_key: sent as ``Authorization: Api-Key <api_key>`` where given.
        connect_timeout_s: limit for the handshake and the metadata frame.
        reply_timeout_s: limit for one reply; a late reply drops the connection.
        ping_interval_s: keepalive ping period; None disables pings.
        ping_timeout_s: drop the connection when a pong is this late.
        resize_images: ``resize_with_pad`` images to the server's ``image_resolution``.
        key_set: camera naming to send: ``droid`` (openpi servers, ours) or ``roboarena``
            (RoboArena servers such as upstream DreamZero's, which also answer a reset with the
            text ``reset successful``).

    Raises:
        PolicyError: where the server cannot be reached or refuses the handshake.

    """

    def __init__(
        self,
        uri: str,
        api_key: str | None = None,
        *,
        connect_timeout_s: float = 10.0,
        reply_timeout_s: float = 120.0,
        ping_interval_s: float | None = 20.0,
        ping_timeout_s: float | None = 60.0,
        resize_images: bool = True,
        key_set: str = 'droid',
    ) -> None:
        self._uri = websocket_uri(uri)
        self._api_key = api_key
        self._connect_timeout_s = connect_timeout_s
        self._reply_timeout_s = reply_timeout_s
        self._ping = (ping_interval_s, ping_timeout_s)
        self._resize_images = resize_images
        self._key_set = observation_keys.KeySet(key_set)
        self._lock = threading.Lock()
        self._ws: ClientConnection | None = None
        with self._lock:
            self._metadata = self._connect()

    @property
    def uri(self) -> str:
        """The server's address."""
        return self._uri

    @property
    def metadata(self) -> Mapping[str, Any]:
        """The server's metadata frame, as received on the last connection."""
        return dict(self._metadata)

    def infer(self, observation: Observation) -> ActionChunk:
        """Send one observation and wait for its action chunk."""
        embodiment = observation_keys.EmbodimentKeys.from_metadata(self._metadata)
        if embodiment is not None:  # a robot other than DROID: the policy's own keys
            request = observation_keys.embodiment_observation_to_request(
                observation, embodiment, self._resize_images
            )
        else:
            cameras = observation_keys.required_cameras(self._metadata)
            observation.validate(cameras)
            resolution = self._metadata.get('image_resolution')
            size = tuple(resolution) if resolution is not None and self._resize_images else None
            request = observation_keys.observation_to_request(
                observation, cameras, size, self._key_set
            )
        request[protocol.SESSION_KEY] = observation.session_id
        request[protocol.ENDPOINT_KEY] = protocol.INFER
        start = time.monotonic()
        with self._lock:
            reply = _decoded(self._uri, self._round_trip(request))
        round_trip_ms = (time.monotonic() - start) * 1000.0
        action_dim = int(self._metadata.get('action_dim', DROID_ACTION_DIM))
        actions, extra = _parse_actions(reply, action_dim)
        timing = {'round_trip': round_trip_ms}
        for name, value in (extra.get('server_timing') or {}).items():
            if isinstance(value, int | float):
                timing[f'server_{name.removesuffix("_ms")}'] = float(value)
        return ActionChunk(
            actions=actions,
            stamp=observation.stamp,
            step_duration=1.0 / float(self._metadata.get('control_hz', DROID_CONTROL_HZ)),
            chunk_id=int(extra.get('chunk_id', 0)),
            timing_ms=timing,
        )

    def reset(self, session_id: str = 'default') -> None:
        """Ask the server to forget one session (a closed connection has forgotten it already)."""
        with self._lock:
            if self._ws is None or self._ws.state is not State.OPEN:
                return
            reply = self._round_trip(
                {protocol.ENDPOINT_KEY: protocol.RESET, protocol.SESSION_KEY: session_id}
            )
        if reply != RESET_ACKNOWLEDGEMENT_TEXT:
            _decoded(self._uri, reply)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            if self._ws is not None:
                self._ws.close()
                self._ws = None

    def _connect(self) -> dict[str, Any]:
        headers = {protocol.CLIENT_HEADER: 'dreamzero_ros'}
        if self._api_key:
            headers['Authorization'] = f'Api-Key {self._api_key}'
        try:
            ws = connect(
                self._uri,
                compression=None,
                additional_headers=headers,
                proxy=None,
                open_timeout=self._connect_timeout_s,
                ping_interval=self._ping[0],
                ping_timeout=self._ping[1],
                max_size=MAX_REPLY_BYTES,
                **_DIRECT_CONNECTION,
            )
        except (OSError, TimeoutError, InvalidHandshake) as error:
            raise ServerConnectionError(
                f'cannot connect to OpenPI server {self._uri}: {error}'
            ) from error
        try:
            metadata = msgpack_numpy.unpackb(ws.recv(timeout=self._connect_timeout_s))
        except (ConnectionClosed, TimeoutError, MsgpackNumpyError) as error:
            ws.close()
            raise PolicyError(f'OpenPI server {self._uri} sent no metadata: {error}') from error
        if not isinstance(metadata, dict):
            ws.close()
            raise PolicyError(f'OpenPI server {self._uri} sent metadata that is not a map')
        self._ws = ws
        return metadata

    def _round_trip(self, request: dict[str, Any]) -> bytes | str:
        """Send one request and return the raw reply, (re)connecting first if needed."""
        if self._ws is None or self._ws.state is not State.OPEN:
            self._metadata = self._connect()
        ws = self._ws
        try:
            ws.send(msgpack_numpy.packb(request))
            return ws.recv(timeout=self._reply_timeout_s)
        except (ConnectionClosed, TimeoutError, OSError) as error:
            ws.close()
            self._ws = None
            raise PolicyError(f'OpenPI server {self._uri}: connection lost ({error})') from error


def _decoded(uri: str, reply: bytes | str) -> Any:
    """A binary reply decoded; a text reply (an error) raised as ObservationError/PolicyError."""
    if isinstance(reply, str):
        kind, message = protocol.parse_error_text(reply)
        error_type = ObservationError if kind == 'ObservationError' else PolicyError
        raise error_type(f'OpenPI server {uri}: {kind}: {message}')
    try:
        return msgpack_numpy.unpackb(reply)
    except MsgpackNumpyError as error:
        raise PolicyError(f'OpenPI server {uri} sent a malformed reply: {error}') from error


def _parse_actions(
    reply: Any, action_dim: int = DROID_ACTION_DIM
) -> tuple[np.ndarray, dict[str, Any]]:
    """Actions and the rest of a reply, which is a map with ``actions`` or a bare array."""
    extra: dict[str, Any] = {}
    if isinstance(reply, dict):
        extra = reply
        reply = reply.get('actions')
    if not isinstance(reply, np.ndarray) or reply.dtype.kind not in 'iuf':
        raise PolicyError('OpenPI reply holds no numeric actions array')
    actions = np.array(reply, dtype=np.float32)
    if actions.ndim != 2 or actions.shape[1] != action_dim or actions.shape[0] < 1:
        raise PolicyError(
            f'OpenPI reply actions have shape {actions.shape}, expected (H, {action_dim})'
        )
    if not np.all(np.isfinite(actions)):
        raise PolicyError('OpenPI reply actions are not finite')
    return actions, extra
