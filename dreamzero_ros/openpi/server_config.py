# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The settings of the OpenPI server: address, key, message limits, capacity, replies.

:class:`ServerConfig`'s defaults are the safe ones; it hands the server's parts their limits
(:meth:`ServerConfig.decode_limits`, :meth:`ServerConfig.capacity_limits`,
:meth:`ServerConfig.refusal_limits`).
"""

from __future__ import annotations

import dataclasses

from dreamzero_ros.openpi import msgpack_numpy, observation_keys, protocol
from dreamzero_ros.openpi.capacity import CapacityLimits, RefusalLimits

REPLY_FORMATS = ('auto', 'dict', 'array')
#: The refusal limits' defaults (declared with them).
_REFUSALS = RefusalLimits()


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    """Settings of :class:`OpenPIServer`; the defaults are the safe ones.

    Attributes:
        host: interface to bind; loopback unless told otherwise (``0.0.0.0`` for all).
        port: TCP port; 0 picks a free one.
        api_key: if set, a client must send ``Authorization: Api-Key <api_key>``.
        max_payload_bytes: largest request accepted; bigger ones close the connection (1009)
            before anything is unpacked.
        max_objects: msgpack objects one request may hold (checked before unpacking).
        max_depth: nesting of maps and arrays one request may have.
        max_prompt_chars: longest prompt accepted.
        max_error_chars: longest error message sent to a client or logged.
        max_connections: open connections in all; a handshake beyond is refused (HTTP 503)
            unless an idle connection can be evicted.
        max_connections_per_client: open connections per client IP address, likewise.
        max_sessions: sessions held at once; None sizes it from the GPU memory left by the
            policy (:func:`~dreamzero_ros.openpi.session_budget.default_max_sessions`).
        max_sessions_per_client: sessions per client IP address; None: ``max_sessions``.
        reserved_sessions: sessions of the policy used outside the server (the policy node's
            own control loop when it serves its engine); the server never counts on them.
        max_sessions_per_connection: a connection that starts more ends its own least
            recently used session (upstream servers end a session on a ``session_id`` change).
        idle_evict_after_s: a connection idle this long (no request; answered pings keep it
            open but do not make it active) may be closed when a new client needs its room.
        open_timeout_s: limit for a client's WebSocket handshake.
        ping_interval_s: keepalive ping period; None disables pings.
        ping_timeout_s: close a connection whose pong is this late.
        metadata_extras: send the policy's extra metadata (horizon, rate) besides the six
            client-configuration fields; RoboArena clients reject unknown keys.
        random_weights: the policy has random weights (``--preset``): DreamZero's own clients
            (:data:`.protocol.CLIENT_HEADER`) are told so in the metadata
            (:data:`.protocol.RANDOM_WEIGHTS_KEY`), so that their reports say the scores mean
            nothing.
        reply_format: ``dict`` replies ``{"actions", "server_timing", "chunk_id"}``;
            ``array`` the bare ``(H, 8)`` array; ``auto`` recognises the client: connections
            on the seed integration's route get arrays, other requests with RoboArena keys
            (``exterior_image_0_left``, as DreamZero's own clients send) arrays, and DROID keys
            (openpi-client, sim-evals, the DROID loop, RoboArena's evaluator) the map.
        camera_aspect: width / height of the clients' cameras, where ``resize_with_pad``'s
            bands are; None takes the policy's (``camera_aspect`` metadata, else DROID's 16:9).
        detect_padding: find the bands among the common camera aspects' instead
            (:data:`~dreamzero_ros.openpi.images.DETECTABLE_ASPECTS`).
        fill_missing_exterior: serve requests with one exterior camera (DROID main loop,
            sim-evals) by giving the other a black frame, a dropped view as in training;
            False refuses them.
        refusal_burst, refusal_rate_per_s, close_after_refusals: what a client address whose
            requests are refused (malformed, bad observations, frames over the payload cap)
            may cost, all its connections together: ``refusal_burst`` refusals at once, then
            ``refusal_rate_per_s`` (nothing more is read from its connections meanwhile); a
            connection is closed (1008) after ``close_after_refusals`` in a row (0: never),
            and the address's handshakes are refused (HTTP 429) until it has rested.
        refusal_bytes_burst, refusal_bytes_per_s: the bytes of refused requests an address may
            make the server read, likewise; in deficit, a frame larger than its bytes in hand
            (at least ``refusal_bytes_per_s``) is refused from its header (1009).
            A request that is not a binary frame holding a msgpack map is refused on its first
            byte, before any decoding.

    """

    host: str = '127.0.0.1'
    port: int = 8000
    api_key: str | None = None
    max_payload_bytes: int = 16 * 2**20
    max_objects: int = 10_000
    max_depth: int = 16
    max_prompt_chars: int = observation_keys.MAX_PROMPT_CHARS
    max_error_chars: int = protocol.MAX_ERROR_CHARS
    max_connections: int = 32
    max_connections_per_client: int = 8
    max_sessions: int | None = None
    max_sessions_per_client: int | None = None
    max_sessions_per_connection: int = 1
    reserved_sessions: int = 0
    idle_evict_after_s: float = 60.0
    open_timeout_s: float = 10.0
    ping_interval_s: float | None = 20.0
    ping_timeout_s: float | None = 20.0
    metadata_extras: bool = False
    random_weights: bool = False
    reply_format: str = 'auto'
    camera_aspect: float | None = None
    detect_padding: bool = False
    fill_missing_exterior: bool = True
    refusal_burst: int = _REFUSALS.burst
    refusal_rate_per_s: float = _REFUSALS.rate_per_s
    close_after_refusals: int = _REFUSALS.close_after
    refusal_bytes_burst: int = _REFUSALS.bytes_burst
    refusal_bytes_per_s: float = _REFUSALS.bytes_per_s

    def __post_init__(self) -> None:
        if self.reply_format not in REPLY_FORMATS:
            raise ValueError(
                f'reply_format must be one of {REPLY_FORMATS}, got {self.reply_format!r}'
            )
        if self.max_payload_bytes < 1024:
            raise ValueError('max_payload_bytes must be >= 1024')
        for name in ('max_objects', 'max_depth', 'max_prompt_chars', 'max_error_chars'):
            if getattr(self, name) < 1:
                raise ValueError(f'{name} must be >= 1')
        if self.reserved_sessions < 0:
            raise ValueError('reserved_sessions must be >= 0')
        if self.camera_aspect is not None and self.camera_aspect <= 0:
            raise ValueError('camera_aspect must be > 0')
        self.capacity_limits(1)  # validates the caps
        self.refusal_limits()

    def refusal_limits(self) -> RefusalLimits:
        """What a connection's refused requests may cost."""
        return RefusalLimits(
            self.refusal_burst,
            self.refusal_rate_per_s,
            self.close_after_refusals,
            self.refusal_bytes_burst,
            self.refusal_bytes_per_s,
        )

    def decode_limits(self) -> msgpack_numpy.DecodeLimits:
        """What one request may hold (strings: a prompt of ``max_prompt_chars`` in UTF-8)."""
        return msgpack_numpy.DecodeLimits(
            self.max_objects, self.max_depth, max(4 * self.max_prompt_chars, 1024)
        )

    def capacity_limits(self, default_sessions: int) -> CapacityLimits:
        """The caps, with ``default_sessions`` where ``max_sessions`` is None."""
        sessions = self.max_sessions or default_sessions
        return CapacityLimits(
            max_connections=self.max_connections,
            max_connections_per_client=self.max_connections_per_client,
            max_sessions=sessions,
            max_sessions_per_client=self.max_sessions_per_client or sessions,
            max_sessions_per_connection=self.max_sessions_per_connection,
            idle_evict_after_s=self.idle_evict_after_s,
            handshake_timeout_s=self.open_timeout_s,
        )
