# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The node's task action ``~/run_task`` (RunTask): goals, feedback, cancel, preemption.

A thin rclpy layer over :class:`~dreamzero_ros.core.control.task_runner.TaskRunner`, which decides
which goals are accepted and how a task ends. The node (a :class:`TaskHost`) starts a task (prompt
and fresh policy session) and ends it (a hold and no further query: ``ControlLoop.pause``) when
told. Goal status by outcome: ``time_limit`` succeeded, ``canceled`` canceled, ``preempted`` and
``fault`` aborted; the result says which and why. Each start and end is also published on
``~/task_events`` (``dreamzero_ros/msg/TaskEvent``, latched), where a recording keeps it: goals
and results travel as services, which rosbag2 does not record. While a task runs, each tick
reads the action clients of ``~/run_task`` from the ROS graph (the subscriptions to its feedback
topic) for the runner's client liveness rule.
"""

from __future__ import annotations

from typing import Any, Protocol

from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future

from dreamzero_ros.core.control.task_runner import (
    CommandState,
    Outcome,
    TaskResult,
    TaskRunner,
    abbreviate,
)
from dreamzero_ros.core.observations.messages import NS_PER_S, to_ns
from dreamzero_ros.errors import TaskRefusedError

try:  # generated from action/RunTask.action (colcon, scripts/build_interfaces.sh)
    from dreamzero_ros.action import RunTask
except ImportError:  # pragma: no cover - depends on the install
    RunTask = None
try:
    from dreamzero_ros.msg import TaskEvent
except ImportError:  # pragma: no cover - depends on the install
    TaskEvent = None

#: ~/task_events: late subscribers (a recorder started after the goal) get the recent events.
TASK_EVENTS_QOS = QoSProfile(
    depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)


class TaskHost(Protocol):
    """What the task server needs from the node."""

    def command_state(self) -> CommandState:
        """Whether the node is active and its commands reach the controller."""

    def now(self) -> float:
        """The node's clock, seconds."""

    def begin_task(self, instruction: str) -> None:
        """Make ``instruction`` the prompt in a fresh policy session and query."""

    def end_task(self, reason: str) -> None:
        """Hold and stop querying until the next task or prompt."""


class TaskServer:
    """``~/run_task`` on ``node``; goals are refused until :meth:`configure`.

    Where RunTask is not built there is no action server (logged once); the rest is inert.
    """

    def __init__(self, node: Any, host: TaskHost) -> None:
        self._node = node
        self._host = host
        self.runner: TaskRunner | None = None
        #: goal id -> (goal handle, future of its TaskResult) of the running task.
        self._running: dict[str, tuple[Any, Future]] = {}
        #: goal id -> (instruction, start time) of the goals started and not yet ended.
        self._started: dict[str, tuple[str, float]] = {}
        self._events = (
            node.create_publisher(TaskEvent, '~/task_events', TASK_EVENTS_QOS)
            if TaskEvent is not None and RunTask is not None
            else None
        )
        if RunTask is None:
            node.get_logger().warning(
                'no ~/run_task action: the RunTask interface is not built (colcon build, or '
                'scripts/build_interfaces.sh)'
            )
            return
        ActionServer(
            node,
            RunTask,
            '~/run_task',
            execute_callback=self._execute,
            goal_callback=self._on_goal,
            cancel_callback=self._on_cancel,
        )

    def configure(
        self, input_timeout: float, client_timeout: float = 0.0, max_length: int = 4096
    ) -> None:
        """Accept goals from now on, with these timeouts and length cap (:class:`TaskRunner`)."""
        self.runner = TaskRunner(input_timeout, client_timeout, max_length)

    def release(self, reason: str) -> None:
        """End the running task (a fault) and refuse goals until the next :meth:`configure`."""
        self.fail(reason)
        self.runner = None

    @property
    def instruction(self) -> str:
        """The running task's instruction; empty when none runs."""
        return (self.runner.instruction if self.runner else None) or ''

    # ------------------------------------------------------------------------ node events

    def tick(self, input_problem: str) -> None:
        """Every control tick: end the task on its time limit, a lost command path, bad inputs."""
        if self.runner is not None:
            clients = self._clients() if self.runner.watches_clients else None
            self._end(
                self.runner.check(
                    self._host.now(), self._host.command_state(), input_problem, clients
                )
            )

    def _clients(self) -> frozenset[str]:
        """Endpoint ids of the action clients of ``~/run_task`` discoverable now."""
        topic = f'{self._node.get_fully_qualified_name().rstrip("/")}/run_task/_action/feedback'
        return frozenset(
            bytes(info.endpoint_gid).hex()
            for info in self._node.get_subscriptions_info_by_topic(topic)
        )

    def chunk_executed(self, envelope: str = '') -> None:
        """A chunk reached the controller (the preview in dry run): feedback to the client.

        ``envelope``: where its plan was cut at the safety envelope; empty when it was not.
        """
        if self.runner is None:
            return
        feedback = self.runner.chunk_executed(self._host.now(), envelope)
        running = self._running.get(self.runner.goal_id or '')
        if feedback is None or running is None:
            return
        running[0].publish_feedback(
            RunTask.Feedback(
                chunks_executed=feedback.chunks_executed,
                elapsed=feedback.elapsed,
                state=feedback.state,
            )
        )

    def fail(self, reason: str) -> None:
        """End the running task with a fault (e-stop, deactivate, policy error...)."""
        if self.runner is not None:
            self._end(self.runner.fail(self._host.now(), reason))

    def preempt(self, reason: str) -> None:
        """Something other than a goal took over (a prompt set by hand): no hold, no pause."""
        if self.runner is not None:
            self._resolve(self.runner.preempt(self._host.now(), reason))

    # ------------------------------------------------------------------------ action server

    def _on_goal(self, goal: Any) -> GoalResponse:
        reason = (
            'the node is not configured'
            if self.runner is None
            else TaskRunner.refusal(
                goal.instruction,
                goal.time_limit,
                self._host.command_state(),
                self.runner.max_length,
            )
        )
        if reason:
            self._node.get_logger().warning(
                f'run_task goal {abbreviate(goal.instruction)!r} refused: {reason}'
            )
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    async def _execute(self, handle: Any) -> Any:
        goal = handle.request
        goal_id = bytes(handle.goal_id.uuid).hex()
        if self.runner is None:
            handle.abort()
            return _result(TaskResult(Outcome.FAULT, 0, 0.0, 'the node is not configured'))
        started_at = self._host.now()
        try:
            preempted = self.runner.start(
                goal_id,
                goal.instruction,
                goal.time_limit,
                self._host.command_state(),
                started_at,
            )
        except TaskRefusedError as error:  # the node changed between acceptance and execution
            handle.abort()
            return _result(TaskResult(Outcome.FAULT, 0, 0.0, str(error)))
        self._resolve(preempted)
        done = Future()
        self._running[goal_id] = (handle, done)
        self._started[goal_id] = (goal.instruction, started_at)
        self._publish_event(goal_id, goal.time_limit, None)
        limit = f', time limit {goal.time_limit:g} s' if goal.time_limit > 0 else ''
        self._node.get_logger().info(f'task {abbreviate(goal.instruction)!r} started{limit}')
        self._host.begin_task(goal.instruction)
        result: TaskResult = await done
        if result.outcome is Outcome.TIME_LIMIT:
            handle.succeed()
        elif result.outcome is Outcome.CANCELED:
            handle.canceled()
        else:
            handle.abort()
        return _result(result)

    def _on_cancel(self, handle: Any) -> CancelResponse:
        if self.runner is None or self.runner.goal_id != bytes(handle.goal_id.uuid).hex():
            return CancelResponse.REJECT
        self._end(self.runner.cancel(self._host.now()))
        return CancelResponse.ACCEPT

    def _end(self, result: TaskResult | None) -> None:
        """The task ended: the node holds first, then the client gets the result."""
        if result is None:
            return
        self._host.end_task(f'task ended: {result.outcome} ({result.message})')
        self._resolve(result)

    def _resolve(self, result: TaskResult | None) -> None:
        if result is None:
            return
        text = (
            f'task ended: {result.outcome}, {result.chunks_executed} chunks in '
            f'{result.elapsed:.2f} s ({result.message})'
        )
        if result.outcome in (Outcome.TIME_LIMIT, Outcome.CANCELED):
            self._node.get_logger().info(text)
        else:
            self._node.get_logger().warning(text)
        for goal_id, (_, done) in list(self._running.items()):
            if self.runner is None or goal_id != self.runner.goal_id:
                del self._running[goal_id]
                self._publish_event(goal_id, 0.0, result)
                done.set_result(result)

    def _publish_event(self, goal_id: str, time_limit: float, result: TaskResult | None) -> None:
        """Publish a goal's start (``result`` None) or end on ``~/task_events``.

        The end is stamped at the start plus the result's ``elapsed``: the task's span exactly.
        """
        instruction, started_at = (
            self._started.get(goal_id) if result is None else self._started.pop(goal_id)
        )
        if self._events is None:
            return
        stamp_ns = to_ns(started_at + (0.0 if result is None else result.elapsed))
        event = TaskEvent(
            goal_id=goal_id,
            event=TaskEvent.STARTED if result is None else TaskEvent.ENDED,
            instruction=instruction,
            time_limit=float(time_limit),
        )
        event.header.stamp.sec, event.header.stamp.nanosec = divmod(stamp_ns, NS_PER_S)
        if result is not None:
            event.outcome = str(result.outcome)
            event.chunks_executed = result.chunks_executed
            event.elapsed = float(result.elapsed)
            event.message = result.message
        self._events.publish(event)


def _result(result: TaskResult) -> Any:
    return RunTask.Result(
        outcome=str(result.outcome),
        chunks_executed=result.chunks_executed,
        elapsed=result.elapsed,
        message=result.message,
    )
