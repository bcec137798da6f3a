# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The node's health as a level, a one-line message and key/value pairs (for /diagnostics)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import math

from dreamzero_ros.core.control.control_loop import ControlLoop
from dreamzero_ros.core.control.task_runner import abbreviate
from dreamzero_ros.core.observations.camera_rates import CameraRate

OK, WARN, ERROR = 0, 1, 2


@dataclass(frozen=True)
class StatusReport:
    """One diagnostic status: ``level`` is OK/WARN/ERROR (the diagnostic_msgs byte values)."""

    level: int
    message: str
    values: tuple[tuple[str, str], ...]

    def value(self, key: str) -> str:
        """The value of ``key``; raises KeyError where absent."""
        for name, value in self.values:
            if name == key:
                return value
        raise KeyError(key)


def _ms(seconds: float) -> str:
    return 'nan' if math.isnan(seconds) else f'{seconds * 1000.0:.1f}'


def build_report(
    loop: ControlLoop,
    now: float,
    *,
    lifecycle_state: str,
    engine_state: str,
    enabled: bool,
    dry_run: bool,
    task: str = '',
    camera_rates: Sequence[CameraRate] = (),
    fault: str = '',
) -> StatusReport:
    """Summarise the loop's counters and state at ``now``; ``task``: the running task's goal.

    ``camera_rates``: each camera's received rate; a slow one makes the level WARN.
    ``fault``: a controller fault (``group: what happened``) that stopped the commands: ERROR
    until commands are enabled again.
    """
    counters = loop.counters
    cache = loop.cache.stats
    refusal = str(loop.last_refusal) if loop.last_refusal is not None else ''
    values = [
        ('lifecycle_state', lifecycle_state),
        ('engine_state', engine_state),
        ('enabled', str(enabled).lower()),
        ('dry_run', str(dry_run).lower()),
        ('commanding', str(enabled and not dry_run and lifecycle_state == 'active').lower()),
        ('session_id', loop.session_id),
        ('prompt', abbreviate(loop.prompt)),
        ('latency_p50_ms', _ms(loop.latency.p50)),
        ('latency_p95_ms', _ms(loop.latency.p95)),
        ('inference_p50_ms', _ms(loop.inference.p50)),
        ('inference_p95_ms', _ms(loop.inference.p95)),
        ('chunk_rate_hz', f'{loop.latency.rate(now):.3f}'),
        ('observation_to_query_p50_ms', _ms(loop.observation_to_query.p50)),
        ('observation_to_query_p95_ms', _ms(loop.observation_to_query.p95)),
        ('chunk_to_publish_p50_ms', _ms(loop.chunk_to_publish.p50)),
        ('chunk_to_publish_p95_ms', _ms(loop.chunk_to_publish.p95)),
        ('queries', str(counters.queries)),
        ('chunks_applied', str(counters.chunks_applied)),
        ('chunks_late', str(counters.chunks_late)),
        ('chunks_discarded', str(counters.chunks_discarded)),
        ('chunks_refused_by_safety', str(counters.chunks_refused)),
        ('policy_errors', str(counters.policy_errors)),
        ('steps_dropped', str(counters.steps_dropped)),
        ('limit_clamps', str(counters.limit_clamps)),
        ('delta_clamps', str(counters.delta_clamps)),
        ('chunks_outside_limits', str(counters.chunks_outside_limits)),
        ('velocity_changes', str(counters.velocity_changes)),
        ('chunks_slowed', str(counters.chunks_slowed)),
        ('holds', str(counters.holds)),
        ('envelope_cuts', str(counters.envelope_cuts)),
        ('holds_outside_envelope', str(counters.holds_outside_envelope)),
        ('last_envelope', str(loop.last_envelope) if loop.last_envelope is not None else ''),
        ('frames_received', str(cache.frames_received)),
        ('frames_dropped', str(cache.frames_out_of_order)),
        ('frames_bad', str(cache.frames_bad)),
        ('joint_states_received', str(cache.joint_states_received)),
        ('joint_states_bad', str(cache.joint_states_bad)),
        ('messages_dropped', str(sum(cache.drops.values()))),
        *((f'dropped_{reason}', str(count)) for reason, count in sorted(cache.drops.items())),
        ('last_drop', str(cache.last_drop) if cache.last_drop is not None else ''),
        ('time_jumps', str(counters.time_jumps)),
        ('observations_refused', str(sum(counters.refusals.values()))),
        *((f'refused_{reason}', str(count)) for reason, count in sorted(counters.refusals.items())),
        ('holding', loop.holding),
        ('paused', loop.paused),
        ('task', task),
        ('last_refusal', refusal),
        ('last_error', loop.last_error),
        *(
            (
                f'camera_rate_hz.{rate.camera}',
                '' if rate.measured is None else f'{rate.measured:.2f}',
            )
            for rate in camera_rates
        ),
    ]
    slow = '; '.join(str(rate) for rate in camera_rates if rate.slow)
    if fault:
        level = ERROR
        message = f'controller fault: {fault}; holding, commands disabled until ~/enable'
    elif engine_state.startswith('error') or lifecycle_state == 'errorprocessing':
        level, message = ERROR, f'engine {engine_state}'
    elif refusal:
        level, message = WARN, f'input refused: {refusal}' + (f'; {slow}' if slow else '')
    elif slow:
        level, message = WARN, slow
    elif loop.paused and lifecycle_state == 'active':
        level, message = OK, f'idle, holding: {loop.paused}'
    elif loop.holding and loop.plan is not None and lifecycle_state == 'active':
        level, message = WARN, f'holding: {loop.holding}'
    elif lifecycle_state != 'active':
        level, message = OK, f'{lifecycle_state}, engine {engine_state}'
    else:
        level = OK
        message = (
            f'active, {"commanding" if enabled and not dry_run else "preview only"}, '
            f'latency p50 {_ms(loop.latency.p50)} ms'
        )
    return StatusReport(level, message, tuple(values))
