# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The ROS-free decision logic of the policy node: when to query, what to command, when to hold.

:class:`ControlLoop` owns the observation cache, the executing plan and the counters. The node
calls :meth:`ControlLoop.poll` at the control rate; it returns a :class:`Query` when an
observation should go to the policy (one in flight at a time, at most every
``min_replan_period`` seconds) and a hold plan when the input went bad (stale, skewed, missing,
bad image or joints) while a motion plan was in force. The policy's answer comes back through
:meth:`ControlLoop.on_chunk`, which drops the past rows, blends the hand-over, applies the safety
limits, gives the rows knot times, velocities and accelerations within the joint limits
(core/motion/trajectory.py, core/motion/time_scaling.py), cuts the plan before it would leave the
Cartesian envelope (core/motion/envelope.py, when the loop has one) and returns the new plan to
command, or says why nothing is commanded. A hold brakes the motion in force to a stop
(core/motion/braking.py).

A clock that jumps back (a bag loop, a simulator reset: :meth:`ControlLoop.on_time_jump`, or
seen by :meth:`ControlLoop.poll` as a ``now`` earlier than the last) clears the cached inputs,
discards the answer in flight, holds the command in force before the jump and asks for a fresh
policy session; querying resumes with the first usable inputs of the new timeline.

:meth:`ControlLoop.pause` stops querying (a task ended: the node holds until the next task or
prompt) until :meth:`ControlLoop.resume`.

Plans are in policy units (radians, gripper in ``[0, 1]``). All times are passed in.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
import itertools

import numpy as np

from dreamzero_ros.core.control.latency_stats import LatencyStats
from dreamzero_ros.core.motion.braking import braking_hold
from dreamzero_ros.core.motion.chunk_scheduler import (
    ActionPlan,
    BlendConfig,
    plan_chunk,
    with_lead_in,
)
from dreamzero_ros.core.motion.envelope import Envelope, Violation
from dreamzero_ros.core.motion.safety import SafetyLimits, SafetyVerdict
from dreamzero_ros.core.motion.trajectory import MotionConfig
from dreamzero_ros.core.observations.observation_cache import ObservationCache, Refusal
from dreamzero_ros.policy_types import ActionChunk, Observation


@dataclass(frozen=True)
class LoopConfig:
    """How often to query, how to hand over and limit the commands.

    ``step_duration`` > 0 replaces the chunks' own row spacing (slow-motion playback for
    policies slower than their horizon); 0 keeps each chunk's. ``motion`` turns the rows into a
    trajectory (arm columns, speed limit, braking holds, hand-over lead).
    """

    limits: SafetyLimits
    blend: BlendConfig = field(default_factory=BlendConfig)
    min_replan_period: float = 0.0
    step_duration: float = 0.0
    motion: MotionConfig = field(default_factory=MotionConfig)

    def __post_init__(self) -> None:
        if self.min_replan_period < 0 or self.step_duration < 0:
            raise ValueError(
                f'min_replan_period and step_duration must be >= 0, got '
                f'{self.min_replan_period}, {self.step_duration}'
            )


@dataclass(frozen=True)
class Query:
    """An observation sent to the policy, tagged so that stale answers can be recognised."""

    observation: Observation
    generation: int
    query_id: int
    sent_at: float
    #: Measured base velocities (the command row's velocity columns) when it was sent.
    velocities: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def measured_command(self) -> np.ndarray:
        """The observed joints, grippers and velocities as a command row: the start of a plan."""
        obs = self.observation
        return np.concatenate([obs.joint_position, obs.gripper_position, self.velocities]).astype(
            np.float64
        )


@dataclass(frozen=True)
class PollResult:
    """What :meth:`ControlLoop.poll` decided.

    Attributes:
        query: send this observation to the policy now, or None.
        refusal: why the current input cannot be used, or None when it can.
        hold: a plan holding the current command, to publish now (input just went bad).
        time_jump: the clock jumped back: the policy session must be reset.

    """

    query: Query | None = None
    refusal: Refusal | None = None
    hold: ActionPlan | None = None
    time_jump: bool = False


@dataclass(frozen=True)
class ChunkOutcome:
    """What became of one chunk.

    Attributes:
        plan: the plan to command now, or None when the chunk is not used.
        discarded: why the chunk is not used; empty when it is.
        latency: seconds from the observation stamp to the chunk's arrival.
        dropped_steps: rows already in the past on arrival.
        blend_window: seconds of hand-over from the previous plan.
        verdict: the safety verdict, None where the chunk did not get that far.
        envelope: where the plan would have left the envelope (it was cut before); None if not.

    """

    plan: ActionPlan | None
    discarded: str
    latency: float
    dropped_steps: int = 0
    blend_window: float = 0.0
    verdict: SafetyVerdict | None = None
    envelope: Violation | None = None


@dataclass
class LoopCounters:
    """Counters reported on diagnostics."""

    queries: int = 0
    chunks_applied: int = 0
    chunks_late: int = 0
    chunks_discarded: int = 0
    chunks_refused: int = 0
    policy_errors: int = 0
    steps_dropped: int = 0
    limit_clamps: int = 0
    delta_clamps: int = 0
    chunks_outside_limits: int = 0
    velocity_changes: int = 0
    chunks_slowed: int = 0
    holds: int = 0
    envelope_cuts: int = 0
    #: Holds whose braking left the envelope even so.
    holds_outside_envelope: int = 0
    time_jumps: int = 0
    refusals: dict[str, int] = field(default_factory=dict)


class ControlLoop:
    """Decides queries, merges chunks into the executing plan, and holds on bad input.

    With an ``envelope`` every plan is cut before it would leave it, ending in a braking hold.
    """

    def __init__(
        self,
        cache: ObservationCache,
        config: LoopConfig,
        prompt: str = '',
        session_id: str = 'default',
        envelope: Envelope | None = None,
    ) -> None:
        self.cache = cache
        self.config = config
        self.envelope = envelope
        #: The last point where a plan would have left the envelope (diagnostics).
        self.last_envelope: Violation | None = None
        self.prompt = prompt
        self.session_id = session_id
        self.plan: ActionPlan | None = None
        self.holding: str = ''
        #: Why no query starts (see :meth:`pause`); empty while the loop runs.
        self.paused: str = ''
        self.last_refusal: Refusal | None = None
        self.last_error: str = ''
        self.latency = LatencyStats()
        self.inference = LatencyStats()
        #: The node's own overhead (recorded by the node, wall-clock seconds): from reading
        #: the inputs to the start of the inference, and from a chunk's return to its
        #: trajectory being published.
        self.observation_to_query = LatencyStats()
        self.chunk_to_publish = LatencyStats()
        self.counters = LoopCounters()
        #: The base velocities measured now (the command row's velocity columns; set by the
        #: node from odometry, zero where there is none); empty for a robot without a base.
        self.measured_velocities = np.zeros(0)
        self._generation = 0
        self._in_flight: Query | None = None
        self._last_query_at: float | None = None
        #: (generation, observation stamp) of the last query sent: the same input is not sent
        #: twice for one generation (two chunks would answer one observation).
        self._last_query_input: tuple[int, float] | None = None
        self._last_now: float | None = None
        self._query_ids = itertools.count()

    @property
    def in_flight(self) -> bool:
        """True while a query awaits its chunk."""
        return self._in_flight is not None

    def poll(self, now: float) -> PollResult:
        """Check the input at ``now``; hold if it went bad, else maybe start a query."""
        if self._last_now is not None and self.is_backward_jump(self._last_now, now):
            return PollResult(hold=self.on_time_jump(self._last_now, now), time_jump=True)
        self._last_now = now
        if self.paused:
            self.last_refusal = None
            return PollResult()
        refusal = self.cache.check(now)
        if (
            refusal is None
            and not self.in_flight
            and not self._replan_too_soon(now)
            and self._has_new_input()
        ):
            observation = self.cache.build(now, self.prompt, self.session_id)
            if isinstance(observation, Refusal):  # a frame it picked could not be decoded
                refusal = observation
            else:
                self.last_refusal = None
                query = Query(
                    observation,
                    self._generation,
                    next(self._query_ids),
                    now,
                    self.measured_velocities.copy(),
                )
                self._in_flight = query
                self._last_query_at = now
                self._last_query_input = (self._generation, observation.stamp)
                self.counters.queries += 1
                return PollResult(query=query)
        if refusal is not None:
            self.last_refusal = refusal
            if not self.in_flight:
                reason = refusal.reason.value
                self.counters.refusals[reason] = self.counters.refusals.get(reason, 0) + 1
            return PollResult(refusal=refusal, hold=self._start_hold(now, str(refusal)))
        self.last_refusal = None
        return PollResult()

    def _has_new_input(self) -> bool:
        """False while no input is newer than the one the last query of this generation sent."""
        newest = self.cache.newest_stamp()
        last = self._last_query_input
        return newest is None or last is None or last[0] != self._generation or newest > last[1]

    def _replan_too_soon(self, now: float) -> bool:
        return (
            self._last_query_at is not None
            and now - self._last_query_at < self.config.min_replan_period
        )

    def is_backward_jump(self, before: float, after: float) -> bool:
        """True when the clock going from ``before`` to ``after`` is a jump back.

        A step back larger than ``max_skew`` (the tolerance of stamps ahead of the clock) would
        leave the cached inputs ahead of every new message.
        """
        return before - after > max(self.cache.config.max_skew, 1e-3)

    def on_time_jump(self, before: float, after: float) -> ActionPlan | None:
        """The clock jumped from ``before`` to ``after``: start over in the new timeline.

        Clears the cached inputs (counters kept), discards the answer in flight and holds the
        command in force at ``before``, re-stamped at ``after``. The caller resets the policy
        session. Returns the hold plan to publish (None before any plan).
        """
        self._last_now = after
        self._last_query_at = None
        self._generation += 1
        self.counters.time_jumps += 1
        self.cache.clear_inputs()
        self.last_refusal = None
        self.holding = f'clock jumped {after - before:+.3f} s: inputs and session cleared'
        if self.plan is None:
            return None
        self.counters.holds += 1
        self.plan = ActionPlan.hold(self.plan.position_at(before), after)
        return self.plan

    def on_chunk(self, query: Query, chunk: ActionChunk, now: float) -> ChunkOutcome:
        """Merge the policy's answer to ``query`` into the plan, or say why it is not used."""
        self._finish(query)
        stamp = query.observation.stamp
        latency = now - stamp
        self.latency.record(latency, now)
        self.inference.record(now - query.sent_at, now)
        if self.config.step_duration > 0:
            chunk = dataclasses.replace(chunk, step_duration=self.config.step_duration)
        discarded = self._discard_reason(query, chunk)
        if discarded:
            self.counters.chunks_discarded += 1
            return ChunkOutcome(None, discarded, latency)
        # Without a plan in force the robot rests at the measured joints: start from there.
        base = self.plan if self.plan is not None else ActionPlan.hold(query.measured_command, now)
        motion = self.config.motion
        lead = motion.lead
        if self.holding and self.plan is not None:
            # The controller starts a hold on receipt, a little later than the plan says: the
            # motion resumes once the hold has settled (then both are at rest at its end).
            lead = max(lead, self.plan.end_time + motion.lead - now)
        limits = self.config.limits
        planned = plan_chunk(
            base,
            chunk.actions,
            stamp,
            chunk.step_duration,
            now,
            self.config.blend,
            limits,
            motion,
            lead,
        )
        merged, verdict, smoothed = planned.merged, planned.verdict, planned.smoothed
        if merged is None:
            self.counters.chunks_late += 1
            self.counters.steps_dropped += chunk.horizon
            return ChunkOutcome(
                None,
                f'late: fewer than 2 of {chunk.horizon} steps still ahead ({latency:.3f} s after '
                'the observation)',
                latency,
                dropped_steps=chunk.horizon,
            )
        self.counters.steps_dropped += merged.dropped_steps
        self.counters.limit_clamps += verdict.limit_clamps
        self.counters.delta_clamps += verdict.delta_clamps
        self.counters.chunks_outside_limits += bool(verdict.outside_joints)
        if smoothed is None or smoothed.plan is None:
            self.counters.chunks_refused += 1
            reason = verdict.reason if smoothed is None else smoothed.reason
            self.last_error = f'safety refused chunk: {reason}'
            hold = self._start_hold(now, self.last_error)
            return ChunkOutcome(
                hold,
                self.last_error,
                latency,
                merged.dropped_steps,
                merged.blend_window,
                verdict,
            )
        self.counters.velocity_changes += smoothed.velocity_changes
        self.counters.chunks_slowed += smoothed.stretch > 1.0
        self.plan = with_lead_in(smoothed.plan, base, now)
        self.holding = ''
        violation = None
        if self.envelope is not None:
            cut = self.envelope.cut(self.plan, limits.lower, limits.upper, motion, chunk.chunk_id)
            violation = cut.violation
            if violation is not None:
                self.plan = cut.plan
                self.counters.envelope_cuts += 1
                self.counters.holds += 1
                self.last_envelope = violation
                self.holding = f'envelope: {violation}'
        self.counters.chunks_applied += 1
        return ChunkOutcome(
            self.plan, '', latency, merged.dropped_steps, merged.blend_window, verdict, violation
        )

    def on_error(self, query: Query, error: BaseException, now: float) -> ActionPlan | None:
        """Record a failed query; returns a hold plan to publish (or None)."""
        self._finish(query)
        self.counters.policy_errors += 1
        self.last_error = f'policy error: {type(error).__name__}: {error}'
        return self._start_hold(now, self.last_error)

    def hold(self, now: float, reason: str) -> ActionPlan | None:
        """Hold the current command from ``now`` (deactivate, disable, reset); the hold plan."""
        return self._start_hold(now, reason)

    def reset(self, now: float, session_id: str | None = None) -> ActionPlan | None:
        """Start a new session: answers to earlier queries are discarded; holds; the hold plan."""
        self._generation += 1
        if session_id is not None:
            self.session_id = session_id
        return self._start_hold(now, 'session reset')

    def set_prompt(self, prompt: str, now: float) -> ActionPlan | None:
        """Change the task; answers for the old prompt are discarded; holds; the hold plan."""
        if prompt == self.prompt:
            return None
        self.prompt = prompt
        self._generation += 1
        return self._start_hold(now, 'prompt changed')

    def pause(self, now: float, reason: str) -> ActionPlan | None:
        """Stop querying until :meth:`resume`; answers in flight are discarded; holds.

        Returns the hold plan to publish (None when already holding or before any plan).
        """
        self.paused = reason
        self._generation += 1
        return self._start_hold(now, reason)

    def resume(self) -> None:
        """Query again (after :meth:`pause`)."""
        self.paused = ''

    def forget_plan(self) -> None:
        """Drop the plan (e.g. on enable): the next chunk starts from the measured joints."""
        self.plan = None
        self.holding = ''

    def command_at(self, now: float) -> np.ndarray | None:
        """The command in force at ``now`` (policy units), or None before any plan."""
        return None if self.plan is None else self.plan.position_at(now)

    def _finish(self, query: Query) -> None:
        if self._in_flight is not None and self._in_flight.query_id == query.query_id:
            self._in_flight = None

    def _discard_reason(self, query: Query, chunk: ActionChunk) -> str:
        if query.generation != self._generation:
            return 'session reset, prompt changed or paused while inferring'
        if self.holding and self.last_refusal is not None:
            return f'input went bad while inferring ({self.holding})'
        actions = np.asarray(chunk.actions)
        width = self.config.limits.lower.shape[0]  # the arm joints, then the gripper (if any)
        if actions.ndim != 2 or actions.shape[1] != width or actions.shape[0] < 1:
            return f'expected (H, {width}) actions, got {actions.shape}'
        if chunk.step_duration <= 0:
            return f'step_duration must be > 0, got {chunk.step_duration}'
        return ''

    def _start_hold(self, now: float, reason: str) -> ActionPlan | None:
        """Brake a motion plan to a stop from ``now``; the braking plan, None if already holding."""
        if self.holding:
            return None
        self.holding = reason
        if self.plan is None:
            return None
        self.counters.holds += 1
        limits = self.config.limits
        hold = braking_hold(self.plan, now, limits.lower, limits.upper, self.config.motion)
        self.plan = hold if self.envelope is None else self._hold_inside(hold)
        return self.plan

    def _hold_inside(self, hold: ActionPlan) -> ActionPlan:
        """``hold``, checked against the envelope: one that leaves it is counted and reported.

        Braking runs along the motion's tangent, not the plan's curve, so from a fast approach
        it may cross a bound the plan stays clear of; it is already the shortest stop the
        acceleration limits allow, so it is kept, and counted (``holds_outside_envelope``,
        ``last_envelope``) for the operator.
        """
        limits, motion = self.config.limits, self.config.motion
        violation = self.envelope.cut(hold, limits.lower, limits.upper, motion).violation
        if violation is None:
            return hold
        self.counters.holds_outside_envelope += 1
        self.last_envelope = violation
        return hold
