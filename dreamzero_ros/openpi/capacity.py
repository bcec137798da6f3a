# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Who may connect and who may hold a session: the OpenPI server's capacity, ROS- and IO-free.

Connections are capped in total and per client address; sessions (model state on the GPU) in
total, per client address and per connection. A session is never taken from a connection that
is open: when a new client needs room, only a connection that has been idle for
``idle_evict_after_s`` (no request in flight or received for that long; answering keepalive
pings does not count as activity here, it only keeps the connection alive) may be evicted, the
longest idle first, and it is closed with the reason; otherwise the newcomer is refused with a
message that says which limit it hit. A connection that starts a new session beyond its own
allowance ends its own least recently used one, as upstream DreamZero servers end a session when
its client switches to another ``session_id``. A client address whose requests are refused is
throttled across all its connections (refusals and the bytes they made the server read) and,
refused often enough in a row, its connection is closed and its new handshakes are refused
until it has rested (:class:`RefusalThrottle`, :class:`ClientLedger`): reconnecting buys no
fresh burst, and clients sending only bad requests cannot take the server's time from good
ones. When the connection caps are reached, a connection of such an address makes room for a
newcomer from another address, busy or not.

Everything here runs on the server's event loop thread; nothing blocks.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
import dataclasses
import time
from typing import Any

from dreamzero_ros.errors import CapacityError


@dataclasses.dataclass(frozen=True)
class CapacityLimits:
    """Connection and session caps (see :class:`~dreamzero_ros.openpi.server.ServerConfig`)."""

    max_connections: int = 32
    max_connections_per_client: int = 8
    max_sessions: int = 4
    max_sessions_per_client: int = 4
    max_sessions_per_connection: int = 1
    idle_evict_after_s: float = 60.0
    handshake_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        for name in (
            'max_connections',
            'max_connections_per_client',
            'max_sessions',
            'max_sessions_per_client',
            'max_sessions_per_connection',
        ):
            if getattr(self, name) < 1:
                raise ValueError(f'{name} must be >= 1, got {getattr(self, name)}')
        if self.idle_evict_after_s < 0 or self.handshake_timeout_s <= 0:
            raise ValueError('idle_evict_after_s must be >= 0 and handshake_timeout_s > 0')


@dataclasses.dataclass(eq=False)
class Peer:
    """One client connection, from the handshake on.

    Attributes:
        number: unique in the process.
        address: the client's IP address.
        opened: clock time of the handshake.
        last_active: clock time a request last arrived or was answered.
        busy: a request is being served.
        requests: requests received so far.
        sessions: the engine session keys it holds, least recently used first.
        handle: the server's object for the connection (set once the connection is open).
        evicted: closed by the server to make room; it no longer counts against any cap.

    """

    number: int
    address: str
    opened: float
    last_active: float
    busy: bool = False
    requests: int = 0
    sessions: OrderedDict[str, None] = dataclasses.field(default_factory=OrderedDict)
    handle: Any = None
    evicted: bool = False

    def idle_s(self, now: float) -> float:
        """Seconds since the last request (or the handshake); 0 while a request is served."""
        return 0.0 if self.busy else now - self.last_active


@dataclasses.dataclass
class SessionClaim:
    """What making room for a session did: own sessions ended, other connections evicted."""

    ended: list[str] = dataclasses.field(default_factory=list)
    evicted: list[Peer] = dataclasses.field(default_factory=list)


class Capacity:
    """The connection and session book of one server.

    Args:
        limits: the caps.
        clock: monotonic seconds (replaceable in tests).

    """

    def __init__(self, limits: CapacityLimits, clock: Callable[[], float] = time.monotonic):
        self.limits = limits
        self._clock = clock
        self._peers: dict[int, Peer] = {}
        self._numbers = 0

    # ------------------------------------------------------------------ connections
    def admit(
        self, address: str, abusive: Callable[[str], bool] = lambda address: False
    ) -> tuple[Peer, list[Peer]]:
        """Register a handshake from ``address``; returns the peer and the peers evicted for it.

        Where the server is full, the victim is a connection idle long enough, else (for a
        newcomer from an address that is not ``abusive`` itself) one of the ``abusive``
        address holding most connections.

        Raises:
            CapacityError: the connection caps are reached and no connection is idle enough.

        """
        now = self._clock()
        self._forget_stale_handshakes(now)
        limits = self.limits
        evicted = []
        same = [p for p in self._live() if p.address == address]
        if len(same) >= limits.max_connections_per_client:
            victim = self._idle_victim(same, now, prefer_sessionless=True)
            if victim is None:
                raise CapacityError(
                    f'too many connections from {address}: {len(same)} open '
                    f'(max_connections_per_client), none idle for {limits.idle_evict_after_s:g} s'
                )
            evicted.append(self._evict(victim))
        live = list(self._live())
        if len(live) >= limits.max_connections:
            victim = self._idle_victim(live, now, prefer_sessionless=True)
            if victim is None and not abusive(address):
                victim = _abusive_victim(live, abusive)
            if victim is None:
                raise CapacityError(
                    f'server full: {len(live)} connections open (max_connections), '
                    f'none idle for {limits.idle_evict_after_s:g} s'
                )
            evicted.append(self._evict(victim))
        self._numbers += 1
        peer = Peer(self._numbers, address, now, now)
        self._peers[peer.number] = peer
        return peer, evicted

    def attach(self, peer: Peer, handle: Any) -> None:
        """The handshake of ``peer`` completed; ``handle`` is its connection object."""
        peer.handle = handle
        peer.last_active = self._clock()

    def release(self, peer: Peer) -> list[str]:
        """``peer`` closed (or was evicted); returns the session keys it held, to be reset."""
        self._peers.pop(peer.number, None)
        keys = list(peer.sessions)
        peer.sessions.clear()
        return keys

    def started(self, peer: Peer) -> None:
        """A request of ``peer`` arrived."""
        peer.busy = True
        peer.requests += 1
        peer.last_active = self._clock()

    def finished(self, peer: Peer) -> None:
        """The request of ``peer`` was answered."""
        peer.busy = False
        peer.last_active = self._clock()

    # ------------------------------------------------------------------ sessions
    def claim_session(self, peer: Peer, key: str) -> SessionClaim:
        """Let ``peer`` use session ``key``, making room if it is new.

        Raises:
            CapacityError: the session caps are reached and no other connection holding a
                session is idle enough to be evicted.

        """
        claim = SessionClaim()
        if key in peer.sessions:
            peer.sessions.move_to_end(key)
            return claim
        limits = self.limits
        now = self._clock()
        own = len(peer.sessions) >= limits.max_sessions_per_connection
        freed = 1 if own else 0
        others = [p for p in self._live() if p is not peer and p.sessions]
        same = [p for p in others if p.address == peer.address]
        held_same = sum(len(p.sessions) for p in same) + len(peer.sessions) - freed
        victims = []
        per_client = limits.max_sessions_per_client < limits.max_sessions
        if per_client and held_same >= limits.max_sessions_per_client:
            victim = self._idle_victim(same, now)
            if victim is None:
                raise CapacityError(
                    f'{peer.address} holds {held_same} sessions (max_sessions_per_client), '
                    f'none of its other connections idle for {limits.idle_evict_after_s:g} s'
                )
            victims.append(victim)
        held = sum(len(p.sessions) for p in others) + len(peer.sessions) - freed
        held -= sum(len(v.sessions) for v in victims)
        if held >= limits.max_sessions:
            victim = self._idle_victim([p for p in others if p not in victims], now)
            if victim is None:
                raise CapacityError(
                    f'all {limits.max_sessions} sessions are in use (max_sessions) by clients '
                    f'active in the last {limits.idle_evict_after_s:g} s; retry later'
                )
            victims.append(victim)
        if own:
            oldest = next(iter(peer.sessions))
            del peer.sessions[oldest]
            claim.ended.append(oldest)
        claim.evicted = [self._evict(victim) for victim in victims]
        peer.sessions[key] = None
        return claim

    def drop_sessions(self, peer: Peer, keys: Iterable[str]) -> None:
        """``peer`` reset these sessions: they hold no room any more."""
        for key in keys:
            peer.sessions.pop(key, None)

    def counts(self, peer: Peer) -> bool:
        """Whether ``peer`` still counts against the caps (not closed, evicted or stale)."""
        return self._peers.get(peer.number) is peer

    def connections_of(self, address: str) -> int:
        """Connections from ``address`` counted against the caps."""
        return sum(1 for peer in self._live() if peer.address == address)

    def held_sessions(self) -> int:
        """Sessions held by open connections."""
        return sum(len(p.sessions) for p in self._live())

    def open_connections(self) -> int:
        """Connections counted against the caps (handshakes in progress included)."""
        return sum(1 for _ in self._live())

    # ------------------------------------------------------------------ internals
    def _live(self) -> Iterable[Peer]:
        return iter(self._peers.values())

    def _forget_stale_handshakes(self, now: float) -> None:
        """Drop admitted handshakes that never completed (the client went away)."""
        timeout = self.limits.handshake_timeout_s
        for peer in list(self._peers.values()):
            if peer.handle is None and now - peer.opened > timeout:
                del self._peers[peer.number]

    def _idle_victim(
        self, candidates: Iterable[Peer], now: float, prefer_sessionless: bool = False
    ) -> Peer | None:
        """The connection to evict, or None.

        One idle for ``idle_evict_after_s`` at least, the longest idle first (those without
        sessions before all others if ``prefer_sessionless``).
        """
        idle = [
            p
            for p in candidates
            if p.handle is not None and p.idle_s(now) >= self.limits.idle_evict_after_s
        ]
        if not idle:
            return None
        return max(idle, key=lambda p: (prefer_sessionless and not p.sessions, p.idle_s(now)))

    def _evict(self, victim: Peer) -> Peer:
        """Stop counting ``victim``; the caller closes it and resets its ``sessions``."""
        self._peers.pop(victim.number, None)
        victim.evicted = True
        return victim


def _abusive_victim(live: list[Peer], abusive: Callable[[str], bool]) -> Peer | None:
    """A connection of the abusive address holding most connections (its newest), or None."""
    counts: dict[str, int] = {}
    for peer in live:
        if peer.handle is not None and abusive(peer.address):
            counts[peer.address] = counts.get(peer.address, 0) + 1
    if not counts:
        return None
    address = max(counts, key=counts.__getitem__)
    return max((p for p in live if p.address == address and p.handle), key=lambda p: p.number)


@dataclasses.dataclass(frozen=True)
class RefusalLimits:
    """What a client address whose requests are refused may cost, all its connections together.

    Attributes:
        burst: refused requests answered at once; beyond, one per ``1 / rate_per_s`` seconds
            (the server reads nothing more from the address's connections meanwhile, so their
            frames wait in their own TCP windows, not in the server's CPU).
        rate_per_s: refusals per second an address earns back (token bucket).
        close_after: consecutive refusals after which the connection is closed (1008) and the
            address's handshakes are refused (HTTP 429) until it has rested; 0 never closes.
        bytes_burst: bytes of refused requests (a frame over the payload cap counts in full)
            read at once; beyond, ``bytes_per_s``.
        bytes_per_s: refused bytes per second an address earns back. While in deficit, the
            address may send no frame larger than its bytes in hand (at least ``bytes_per_s``):
            a larger one is refused from its header (1009), before its payload is read.

    """

    burst: int = 4
    rate_per_s: float = 2.0
    close_after: int = 16
    bytes_burst: int = 32 * 2**20
    bytes_per_s: float = 8 * 2**20

    def __post_init__(self) -> None:
        if self.burst < 1 or not self.rate_per_s > 0 or self.close_after < 0:
            raise ValueError(
                f'refusal limits: burst >= 1, rate_per_s > 0, close_after >= 0, got {self}'
            )
        if self.bytes_burst < 1 or not self.bytes_per_s >= 1:
            raise ValueError(f'refusal limits: bytes_burst, bytes_per_s >= 1, got {self}')


class RefusalThrottle:
    """One client address's refusals: when to read its next request, close, and how large.

    How long to wait before reading its next request, when to close its connection, how large
    a frame it may send.

    Args:
        limits: the limits.
        clock: monotonic seconds (replaceable in tests).

    """

    def __init__(self, limits: RefusalLimits, clock: Callable[[], float] = time.monotonic):
        self.limits = limits
        self._clock = clock
        self._tokens = float(limits.burst)
        self._bytes = float(limits.bytes_burst)
        self._updated = clock()
        self.consecutive = 0
        self.total = 0

    def refused(self, size: int = 0) -> None:
        """A request of ``size`` bytes from the address was refused."""
        self._refill()
        self._tokens -= 1.0
        self._bytes -= size
        self.consecutive += 1
        self.total += 1

    def served(self) -> None:
        """A request of the address was served: the consecutive count starts again."""
        self.consecutive = 0

    @property
    def exhausted(self) -> bool:
        """Whether the connection is to be closed (``close_after`` refusals in a row)."""
        return 0 < self.limits.close_after <= self.consecutive

    @property
    def abusive(self) -> bool:
        """Whether the address's last ``burst`` requests or more were all refused."""
        return self.consecutive >= self.limits.burst

    @property
    def rested(self) -> bool:
        """Whether both buckets are full again (then the consecutive count starts again)."""
        self._refill()
        return self._tokens >= self.limits.burst and self._bytes >= self.limits.bytes_burst

    def wait_s(self) -> float:
        """Seconds to wait before reading the address's next request (0: at once)."""
        self._refill()
        limits = self.limits
        return max(
            max(0.0, 1.0 - self._tokens) / limits.rate_per_s,
            max(0.0, -self._bytes) / limits.bytes_per_s,
        )

    def frame_allowance(self, max_payload: int, connections: int = 1) -> int:
        """The largest frame each of the address's ``connections`` may send now.

        Its bytes in hand shared among its connections, at least ``bytes_per_s`` (a 720p DROID
        request), at most ``max_payload``.
        """
        self._refill()
        share = self._bytes / max(connections, 1)
        return int(min(max_payload, max(self.limits.bytes_per_s, share)))

    def _refill(self) -> None:
        now = self._clock()
        limits = self.limits
        elapsed = now - self._updated
        self._tokens = min(float(limits.burst), self._tokens + elapsed * limits.rate_per_s)
        self._bytes = min(float(limits.bytes_burst), self._bytes + elapsed * limits.bytes_per_s)
        self._updated = now
        if self._tokens >= limits.burst and self._bytes >= limits.bytes_burst:
            self.consecutive = 0


class ClientLedger:
    """The refusal throttle of every client address, shared by its connections.

    Addresses whose throttle has rested are forgotten once more than ``max_addresses`` are
    known (a rested throttle is a new one), so the ledger stays small.

    Args:
        limits: the limits of each address.
        max_addresses: addresses kept before the rested ones are dropped.
        clock: monotonic seconds (replaceable in tests).

    """

    def __init__(
        self,
        limits: RefusalLimits,
        max_addresses: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.limits = limits
        self._max_addresses = max_addresses
        self._clock = clock
        self._throttles: dict[str, RefusalThrottle] = {}

    def of(self, address: str) -> RefusalThrottle:
        """The throttle of ``address`` (created as rested)."""
        throttle = self._throttles.get(address)
        if throttle is None:
            if len(self._throttles) >= self._max_addresses:
                self._throttles = {a: t for a, t in self._throttles.items() if not t.rested}
            throttle = self._throttles[address] = RefusalThrottle(self.limits, self._clock)
        return throttle

    def abusive(self, address: str) -> bool:
        """Whether ``address``'s recent requests were all refused."""
        throttle = self._throttles.get(address)
        return throttle is not None and throttle.abusive

    def handshake_refusal(self, address: str) -> str | None:
        """Why a handshake from ``address`` is refused now, or None."""
        throttle = self._throttles.get(address)
        if throttle is None or throttle.rested or not throttle.exhausted:
            return None
        return (
            f'{throttle.consecutive} requests in a row from {address} refused; retry in '
            f'{max(throttle.wait_s(), 1.0):.0f} s'
        )

    def __len__(self) -> int:
        return len(self._throttles)
