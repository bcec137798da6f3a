# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Connection and session capacity: the book-keeping alone, on a hand-driven clock."""

from __future__ import annotations

import pytest

from dreamzero_ros.openpi.capacity import Capacity, CapacityError, CapacityLimits
from dreamzero_ros.openpi.session_budget import sessions_that_fit

GIB = 2**30


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _book(**limits):
    clock = Clock()
    return Capacity(CapacityLimits(idle_evict_after_s=30.0, **limits), clock), clock


def _open(book, address='10.0.0.1'):
    peer, evicted = book.admit(address)
    book.attach(peer, handle=object())
    return peer, evicted


def test_connections_beyond_the_caps_are_refused_with_the_limit_named():
    book, _ = _book(max_connections=3, max_connections_per_client=2)
    _open(book, '10.0.0.1')
    _open(book, '10.0.0.1')
    with pytest.raises(CapacityError, match=r'too many connections from 10\.0\.0\.1.*per_client'):
        book.admit('10.0.0.1')
    _open(book, '10.0.0.2')
    with pytest.raises(CapacityError, match='server full: 3 connections open'):
        book.admit('10.0.0.3')
    assert book.open_connections() == 3


def test_only_connections_idle_long_enough_are_evicted_for_a_newcomer():
    book, clock = _book(max_connections=2, max_connections_per_client=2)
    holder, _ = _open(book)
    book.claim_session(holder, 'a')
    sessionless, _ = _open(book)
    clock.now += 29.0
    with pytest.raises(CapacityError):
        book.admit('10.0.0.1')
    clock.now += 2.0
    newcomer, evicted = book.admit('10.0.0.1')
    # Both are idle long enough: the one without a session goes first.
    assert evicted == [sessionless] and sessionless.evicted
    assert not book.counts(sessionless) and book.counts(newcomer)
    assert book.release(sessionless) == []


def test_a_busy_connection_is_never_evicted():
    book, clock = _book(max_connections=1, max_connections_per_client=1)
    peer, _ = _open(book)
    book.started(peer)  # a long inference
    clock.now += 3600.0
    with pytest.raises(CapacityError):
        book.admit('10.0.0.9')
    book.finished(peer)
    clock.now += 31.0
    assert book.admit('10.0.0.9')[1] == [peer]


def test_a_new_session_of_a_connection_ends_its_previous_one():
    book, _ = _book(max_sessions=4, max_sessions_per_connection=1)
    peer, _ = _open(book)
    assert book.claim_session(peer, 'episode-1').ended == []
    assert book.claim_session(peer, 'episode-1').ended == []
    claim = book.claim_session(peer, 'episode-2')
    assert claim.ended == ['episode-1'] and claim.evicted == []
    assert list(peer.sessions) == ['episode-2'] and book.held_sessions() == 1


def test_sessions_of_open_connections_are_kept_and_newcomers_refused():
    book, clock = _book(max_sessions=5)
    peers = [_open(book, f'10.0.0.{i}')[0] for i in range(6)]
    for index, peer in enumerate(peers[:5]):
        book.claim_session(peer, f's{index}')
    with pytest.raises(CapacityError, match='all 5 sessions are in use'):
        book.claim_session(peers[5], 's5')
    assert book.held_sessions() == 5
    assert all(peer.sessions for peer in peers[:5]) and not peers[5].sessions
    # Once one of them has been idle long enough, it makes room (and only that one).
    for peer in peers[1:5]:
        book.started(peer)
    clock.now += 31.0
    claim = book.claim_session(peers[5], 's5')
    assert claim.evicted == [peers[0]] and book.release(peers[0]) == ['s0']
    assert book.held_sessions() == 5


def test_sessions_are_capped_per_client_address():
    book, clock = _book(max_sessions=4, max_sessions_per_client=2)
    first, second, third = (_open(book, '10.0.0.1')[0] for _ in range(3))
    book.claim_session(first, 'a')
    book.claim_session(second, 'b')
    with pytest.raises(CapacityError, match=r'10\.0\.0\.1 holds 2 sessions'):
        book.claim_session(third, 'c')
    other = _open(book, '10.0.0.2')[0]
    book.claim_session(other, 'd')  # another address is not affected
    clock.now += 31.0
    assert book.claim_session(third, 'c').evicted == [first]


def test_reset_sessions_free_their_room():
    book, _ = _book(max_sessions=1)
    first, second = _open(book)[0], _open(book, '10.0.0.2')[0]
    book.claim_session(first, 'a')
    book.drop_sessions(first, ['a'])
    assert book.claim_session(second, 'b').evicted == []


def test_handshakes_that_never_complete_stop_counting():
    book, clock = _book(max_connections=1, max_connections_per_client=1)
    stalled, _ = book.admit('10.0.0.1')  # never attached
    with pytest.raises(CapacityError):
        book.admit('10.0.0.2')
    clock.now += 11.0
    assert book.admit('10.0.0.2')[1] == [] and not book.counts(stalled)


def test_limits_are_validated():
    with pytest.raises(ValueError, match='max_sessions must be >= 1'):
        CapacityLimits(max_sessions=0)
    with pytest.raises(ValueError, match='idle_evict_after_s'):
        CapacityLimits(idle_evict_after_s=-1)


@pytest.mark.parametrize(
    ('free', 'total', 'expected'),
    [
        (103 * GIB, 141 * GIB, 6),  # H200 with the 14B model loaded (~38 GiB)
        (42 * GIB, 80 * GIB, 2),  # 80 GB card
        (4 * GIB, 32 * GIB, 1),  # never less than one
        (10_000 * GIB, 10_000 * GIB, 8),  # never more than eight by default
    ],
)
def test_default_session_capacity_is_what_fits_in_gpu_memory(free, total, expected):
    per_session = int(13.3 * GIB)  # 14B, bfloat16, batched CFG
    assert sessions_that_fit(free, total, per_session) == expected


def test_refusals_are_answered_in_a_burst_then_at_the_rate_and_close_after_a_run():
    from dreamzero_ros.openpi.capacity import RefusalLimits, RefusalThrottle

    now = [0.0]
    throttle = RefusalThrottle(
        RefusalLimits(burst=2, rate_per_s=4.0, close_after=5), lambda: now[0]
    )
    waits = []
    for _ in range(4):
        waits.append(throttle.wait_s())
        now[0] += waits[-1]
        throttle.refused()
    assert waits[:3] == [0.0, 0.0, 0.25] and waits[3] == pytest.approx(0.25)
    assert not throttle.exhausted
    throttle.served()  # a good request: the run starts again, the bucket does not refill
    assert throttle.consecutive == 0 and throttle.wait_s() == pytest.approx(0.25)
    for _ in range(5):
        now[0] += throttle.wait_s()
        throttle.refused()
    assert throttle.exhausted and throttle.total == 9
    with pytest.raises(ValueError, match='refusal limits'):
        RefusalLimits(burst=0)


def test_an_address_shares_one_throttle_across_its_connections_and_is_shut_out_until_rested():
    from dreamzero_ros.openpi.capacity import ClientLedger, RefusalLimits

    clock = Clock()
    ledger = ClientLedger(RefusalLimits(burst=2, rate_per_s=1.0, close_after=3), clock=clock)
    first, again = ledger.of('10.0.0.1'), ledger.of('10.0.0.1')
    assert first is again and ledger.of('10.0.0.2') is not first
    first.refused()
    first.refused()
    assert again.wait_s() == pytest.approx(1.0)  # a new connection: no fresh burst
    assert ledger.abusive('10.0.0.1') and not ledger.abusive('10.0.0.2')
    assert ledger.handshake_refusal('10.0.0.1') is None
    clock.now += 1.0
    again.refused()
    assert again.exhausted
    assert '3 requests in a row from 10.0.0.1 refused' in ledger.handshake_refusal('10.0.0.1')
    assert ledger.handshake_refusal('10.0.0.2') is None
    clock.now += 2.0  # both buckets full again: rested, the run forgotten
    assert ledger.handshake_refusal('10.0.0.1') is None and not again.exhausted


def test_refused_bytes_throttle_an_address_and_shrink_the_frames_it_may_send():
    from dreamzero_ros.openpi.capacity import RefusalLimits, RefusalThrottle

    clock = Clock()
    mib = 2**20
    limits = RefusalLimits(burst=100, bytes_burst=32 * mib, bytes_per_s=8 * mib)
    throttle = RefusalThrottle(limits, clock)
    cap = 16 * mib
    assert throttle.frame_allowance(cap) == cap
    assert throttle.frame_allowance(cap, connections=8) == 8 * mib  # 4 MiB each, at least 8
    assert throttle.frame_allowance(cap, connections=2) == cap
    throttle.refused(15 * mib)
    throttle.refused(15 * mib)
    assert throttle.wait_s() == 0.0 and throttle.frame_allowance(cap) == 8 * mib
    throttle.refused(10 * mib)  # 8 MiB in deficit: a second to earn them back
    assert throttle.wait_s() == pytest.approx(1.0)
    clock.now += 5.0
    assert throttle.frame_allowance(cap) == cap


def test_a_full_server_evicts_a_connection_of_an_abusive_address_for_a_newcomer():
    book, clock = _book(max_connections=4, max_connections_per_client=3)
    bad = {'10.0.0.66'}
    for address in ('10.0.0.66', '10.0.0.66', '10.0.0.66', '10.0.0.7'):
        _open(book, address)
    with pytest.raises(CapacityError, match='server full'):
        book.admit('10.0.0.8')  # nobody idle, nobody abusive
    peer, evicted = book.admit('10.0.0.8', lambda address: address in bad)
    assert [victim.address for victim in evicted] == ['10.0.0.66']
    assert max(p.number for p in evicted) == 3  # the abusive address's newest connection
    book.attach(peer, handle=object())
    with pytest.raises(CapacityError, match='server full'):  # abusive newcomers evict no one
        book.admit('10.0.0.66', lambda address: address in bad)
    assert book.connections_of('10.0.0.66') == 2
