# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The task interface's decisions (the node's ``~/run_task`` action), without ROS.

A task runs the policy on one instruction until its time limit, a cancel, a newer task, or a
fault. :class:`TaskRunner` holds at most one task and says when it ends and with which
:class:`TaskResult`; the node does the rest (prompt and fresh session at the start, a hold and
no further query at the end).

A goal is accepted only while the node is active and its commands reach the controller (enabled,
not in dry run), or in dry run, where the task runs on previews only (nothing reaches the
controller; the feedback state is ``dry_run``, ``chunks_executed`` counts previewed chunks). Its
instruction must not be empty nor longer than ``max_length`` characters (the node's
``max_prompt_length``, which caps prompts too), its time limit (seconds, 0 = none) not
negative. Logs and diagnostics show instructions and prompts through :func:`abbreviate`.

Ends (``outcome``):

- ``time_limit``: the time limit passed;
- ``canceled``: the client canceled the goal;
- ``preempted``: a newer goal, or a prompt set through ``~/prompt`` or the ``prompt``
  parameter, took over;
- ``fault``: the node stopped commanding as the task was accepted (commands disabled, e-stop,
  dry run switched), was deactivated or shut down, the policy failed, the clock jumped back,
  the inputs stayed unusable for longer than ``input_timeout`` seconds, or the goal's client
  was gone for longer than ``client_timeout`` seconds; ``message`` says which.

Client liveness: a goal lives only as long as its client. The node sees the action clients of
``~/run_task`` (their endpoint ids, from the ROS graph) but not which of them sent a goal, so
the rule is: every client seen when the task started (or, if none was seen yet, the first ones
seen) must stay discoverable; when one of them is gone (or none ever appears) for longer than
``client_timeout`` seconds, the task ends as a fault and the node holds. A client killed
without a clean shutdown leaves the graph when its DDS lease ends (Fast DDS: 20 s by default),
so such a goal ends within that lease plus ``client_timeout``. ``client_timeout`` 0 lets goals
outlive their clients (then give goals a time limit).

A chunk cut at the safety envelope (core/motion/envelope.py) still counts as executed: its feedback
state is ``envelope_hold``, and the result's message names how many chunks were cut and the last
offending point.
"""

from __future__ import annotations

from dataclasses import dataclass
import math

from dreamzero_ros.core.str_enum import StrEnum
from dreamzero_ros.errors import TaskRefusedError

#: Characters of a prompt or instruction that logs and diagnostics show.
SHOWN_LENGTH = 80


def abbreviate(text: str, length: int = SHOWN_LENGTH) -> str:
    """``text`` with its middle cut out to keep it near ``length`` characters (and its length)."""
    if len(text) <= length:
        return text
    half = length // 2
    return f'{text[:half]} ... {text[-half:]} ({len(text)} characters)'


def prompt_too_long(what: str, text: str, max_length: int) -> str:
    """Why ``text`` (a ``what``: prompt, instruction) is refused; empty when it fits."""
    if len(text) <= max_length:
        return ''
    return f'the {what} has {len(text)} characters, more than max_prompt_length ({max_length})'


#: Feedback states.
EXECUTING = 'executing'
DRY_RUN = 'dry_run'
INPUTS_UNUSABLE = 'inputs_unusable'
ENVELOPE_HOLD = 'envelope_hold'


class Outcome(StrEnum):
    """How a task ended (the result's ``outcome``)."""

    TIME_LIMIT = 'time_limit'
    CANCELED = 'canceled'
    PREEMPTED = 'preempted'
    FAULT = 'fault'


@dataclass(frozen=True)
class CommandState:
    """Whether the node's commands reach the controller."""

    active: bool
    enabled: bool
    dry_run: bool

    @property
    def mode(self) -> str:
        """``commanding``, ``dry_run`` (previews only) or ``disabled``."""
        if self.dry_run:
            return 'dry_run'
        return 'commanding' if self.enabled else 'disabled'


@dataclass(frozen=True)
class TaskFeedback:
    """Sent after each executed chunk."""

    chunks_executed: int
    elapsed: float
    state: str


@dataclass(frozen=True)
class TaskResult:
    """How and when a task ended."""

    outcome: Outcome
    chunks_executed: int
    elapsed: float
    message: str


@dataclass
class _Task:
    goal_id: str
    instruction: str
    time_limit: float
    started: float
    mode: str
    chunks: int = 0
    unusable_since: float | None = None
    envelope_cuts: int = 0
    last_envelope: str = ''
    envelope_holding: bool = False
    clients: frozenset[str] = frozenset()
    client_missing_since: float | None = None


class TaskRunner:
    """At most one task: accepts goals, counts executed chunks, decides how the task ends."""

    def __init__(
        self, input_timeout: float, client_timeout: float = 0.0, max_length: int = 4096
    ) -> None:
        if not input_timeout > 0:
            raise ValueError(f'input_timeout must be > 0, got {input_timeout}')
        if not (math.isfinite(client_timeout) and client_timeout >= 0):
            raise ValueError(f'client_timeout must be >= 0, got {client_timeout}')
        self.input_timeout = input_timeout
        self.client_timeout = client_timeout
        self.max_length = max_length
        self._task: _Task | None = None

    @property
    def goal_id(self) -> str | None:
        """The running task's goal id; None when no task runs."""
        return None if self._task is None else self._task.goal_id

    @property
    def instruction(self) -> str | None:
        """The running task's instruction; None when no task runs."""
        return None if self._task is None else self._task.instruction

    @staticmethod
    def refusal(
        instruction: str, time_limit: float, state: CommandState, max_length: int = 4096
    ) -> str:
        """Why a goal cannot be accepted now; empty when it can."""
        if len(instruction) > max_length:
            return prompt_too_long('instruction', instruction, max_length)
        if not instruction.strip():
            return 'the instruction is empty'
        if not math.isfinite(time_limit) or time_limit < 0:
            return f'time_limit must be >= 0 seconds (0: none), got {time_limit}'
        if not state.active:
            return 'the node is not active'
        if state.mode == 'disabled':
            return 'commands are disabled: enable them with ~/enable (or set dry_run)'
        return ''

    def start(
        self, goal_id: str, instruction: str, time_limit: float, state: CommandState, now: float
    ) -> TaskResult | None:
        """Run a new task from ``now``; returns the result of the task it preempts, if any.

        Raises:
            TaskRefusedError: the goal is refused (:meth:`refusal`).

        """
        reason = self.refusal(instruction, time_limit, state, self.max_length)
        if reason:
            raise TaskRefusedError(reason)
        why = f'preempted by a new goal: {abbreviate(instruction)!r}'
        preempted = self._end(Outcome.PREEMPTED, now, why)
        self._task = _Task(goal_id, instruction, float(time_limit), now, state.mode)
        return preempted

    def chunk_executed(self, now: float, envelope: str = '') -> TaskFeedback | None:
        """A chunk of the running task reached the controller (or the preview in dry run).

        ``envelope``: where the chunk's plan would have left the envelope (it was cut there and
        ends in a hold); empty when it stays inside.
        """
        task = self._task
        if task is None:
            return None
        task.chunks += 1
        task.envelope_holding = bool(envelope)
        if envelope:
            task.envelope_cuts += 1
            task.last_envelope = envelope
        return self.feedback(now)

    def feedback(self, now: float) -> TaskFeedback | None:
        """The running task's progress; None when no task runs."""
        task = self._task
        if task is None:
            return None
        state = DRY_RUN if task.mode == 'dry_run' else EXECUTING
        if task.envelope_holding:
            state = ENVELOPE_HOLD
        if task.unusable_since is not None:
            state = INPUTS_UNUSABLE
        return TaskFeedback(task.chunks, now - task.started, state)

    @property
    def watches_clients(self) -> bool:
        """Whether :meth:`check` wants the action clients seen now (a task runs, a timeout)."""
        return self._task is not None and self.client_timeout > 0

    def check(
        self,
        now: float,
        state: CommandState,
        input_problem: str,
        clients: frozenset[str] | None = None,
    ) -> TaskResult | None:
        """Called every control tick: the result if the task ends now, else None.

        ``input_problem`` is why the inputs are unusable now (empty when they are usable);
        ``clients`` the ids of the action clients discoverable now (None: not looked at).
        """
        task = self._task
        if task is None:
            return None
        if not state.active:
            return self.fail(now, 'the node was deactivated')
        if state.mode != task.mode:
            return self.fail(now, f'commands went from {task.mode} to {state.mode}')
        if task.time_limit > 0 and now - task.started >= task.time_limit:
            return self._end(
                Outcome.TIME_LIMIT, now, f'time limit of {task.time_limit:g} s reached'
            )
        if clients is not None and self.client_timeout > 0:
            lost = self._client_lost(task, now, clients)
            if lost:
                return self.fail(now, lost)
        if not input_problem:
            task.unusable_since = None
            return None
        if task.unusable_since is None:
            task.unusable_since = now
        if now - task.unusable_since > self.input_timeout:
            return self.fail(
                now,
                f'inputs unusable for more than {self.input_timeout:g} s: {input_problem}',
            )
        return None

    def _client_lost(self, task: _Task, now: float, clients: frozenset[str]) -> str:
        """Why the goal's client counts as gone now (see the module's docstring); or empty."""
        if not task.clients:
            task.clients = clients
        missing = len(task.clients - clients) if task.clients else 0
        if task.clients and not missing:
            task.client_missing_since = None
            return ''
        if task.client_missing_since is None:
            task.client_missing_since = now
        if now - task.client_missing_since <= self.client_timeout:
            return ''
        if not task.clients:
            return f'no action client of the goal discoverable for {self.client_timeout:g} s'
        return (
            f"the goal's client is gone: {missing} of the {len(task.clients)} action client(s) "
            f'seen at its start not discoverable for more than {self.client_timeout:g} s'
        )

    def cancel(self, now: float) -> TaskResult | None:
        """The client canceled the running task."""
        return self._end(Outcome.CANCELED, now, 'canceled')

    def preempt(self, now: float, reason: str) -> TaskResult | None:
        """Something other than a goal took over (a prompt set by hand)."""
        return self._end(Outcome.PREEMPTED, now, reason)

    def fail(self, now: float, reason: str) -> TaskResult | None:
        """End the running task with a fault (e-stop, deactivate, policy error...)."""
        return self._end(Outcome.FAULT, now, reason)

    def _end(self, outcome: Outcome, now: float, message: str) -> TaskResult | None:
        task = self._task
        if task is None:
            return None
        self._task = None
        if task.envelope_cuts:
            message += (
                f'; {task.envelope_cuts} chunk(s) cut at the safety envelope, last: '
                f'{task.last_envelope}'
            )
        return TaskResult(outcome, task.chunks, now - task.started, message)
