# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The DreamZero policy node: camera frames and joint states in, safe joint trajectories out.

A lifecycle node. ``configure`` reads the parameters, loads and warms the policy and subscribes
to the inputs; ``activate`` starts querying the policy and publishing; ``deactivate`` holds the
current command. With ``autostart`` (the default) it configures and activates itself.

Topics (names relative to the node's namespace; ``~`` is the node's private namespace):

- in: ``<camera_topics>`` (sensor_msgs/Image, or CompressedImage on ``<topic>/compressed``),
  ``joint_states`` (sensor_msgs/JointState) -- the sensor inputs are read once per control tick
  and before each query (:mod:`~dreamzero_ros.ros.polled_inputs`), not one callback per message --,
  ``~/prompt`` (std_msgs/String, volatile or latched),
  ``~/estop`` (std_msgs/Bool: true disables commands at once);
- out: ``trajectory_topic`` (trajectory_msgs/JointTrajectory for joint_trajectory_controller;
  only while active, enabled and not dry_run; arm joints only), the gripper command
  (``gripper.interface``: GripperCommand action, Float64 or JointTrajectory on
  ``gripper.command_name``, same conditions) -- or, with ``action_groups``, each group's own
  controller (:mod:`~dreamzero_ros.ros.group_outputs`: trajectory topics or actions, grippers,
  Twist for a base; joint states also from each group's ``state_topic``, a base's velocity
  from its odometry) --, ``preview_topic`` (every merged trajectory),
  ``chunk_topic`` (dreamzero_ros/msg/ActionChunk, raw chunks, where built),
  ``step_command.topic`` (optional per-step commands), ``~/status`` (PolicyStatus, where built),
  ``~/plan_path``, ``~/executed_path`` and ``~/envelope`` (the plan in 3D, where the robot
  description is read: :mod:`~dreamzero_ros.ros.plan_views`), ``/diagnostics``.

The cameras (``camera_keys`` mapped to ``camera_topics``), the arm joints and the gripper follow
the loaded policy: configure fails, saying what differs, when the parameters do not fit it.

Action: ``~/run_task`` (RunTask, where the interfaces are built): one instruction until a time
limit, a cancel, a newer goal or a fault, then a hold (:mod:`~dreamzero_ros.ros.task_server`).

Services: ``~/reset`` (std_srvs/Trigger), ``~/enable`` (std_srvs/SetBool), the lifecycle
services, and the parameter services (``prompt``, ``session_id`` and ``dry_run`` may change at
any time; the others while the node is unconfigured, taking effect at the next configure).
Here: the wiring (parameters, topics, services) and the lifecycle transitions, the control tick
and the chunks' arrival. Its parts: the inputs (:mod:`~dreamzero_ros.ros.node_inputs`), what it
publishes (:mod:`~dreamzero_ros.ros.node_outputs`), the inference thread
(:mod:`~dreamzero_ros.ros.inference_worker`), its answers to requests and events
(:mod:`~dreamzero_ros.ros.node_requests`); the console script's ``main`` is in
:mod:`~dreamzero_ros.ros.policy_node_main`.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
import numpy as np
from rclpy.clock import JumpThreshold
from rclpy.duration import Duration
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from std_msgs.msg import Bool
from std_srvs.srv import SetBool, Trigger

from dreamzero_ros.core.config import node_config
from dreamzero_ros.core.config.node_config import NODE_NAME, build_settings
from dreamzero_ros.core.config.node_settings import NodeSettings
from dreamzero_ros.core.config.node_validation import check_policy
from dreamzero_ros.core.control.control_loop import ControlLoop
from dreamzero_ros.core.control.repeat_limiter import RepeatLimiter
from dreamzero_ros.core.control.status_report import build_report
from dreamzero_ros.core.control.task_runner import CommandState, abbreviate
from dreamzero_ros.core.motion.chunk_scheduler import ActionPlan
from dreamzero_ros.core.observations.imagination import policy_keeps_views
from dreamzero_ros.core.observations.observation_cache import Drop, ObservationCache, Refusal
from dreamzero_ros.core.policy.api_keys import BRIDGE_API_KEY_ENV, read_api_key
from dreamzero_ros.core.policy.policy_factory import create_policy, warm_up
from dreamzero_ros.core.policy.serialized_policy import SerializedPolicy
from dreamzero_ros.core.robot.action_groups import GroupLayout
from dreamzero_ros.core.robot.robot_description import RobotDescription
from dreamzero_ros.core.robot.robot_layout import RobotLayout
from dreamzero_ros.openpi.remote_policy import RemoteOpenPIPolicy
from dreamzero_ros.ros import conversions, parameters
from dreamzero_ros.ros.controller_monitor import ControllerMonitor
from dreamzero_ros.ros.conversions import PolicyStatusMsg
from dreamzero_ros.ros.group_outputs import GroupOutputs
from dreamzero_ros.ros.image_decoding import decode_image
from dreamzero_ros.ros.imagination_views import ImaginationViews
from dreamzero_ros.ros.inference_worker import Answer, InferenceWorker
from dreamzero_ros.ros.node_inputs import NodeInputs
from dreamzero_ros.ros.node_outputs import NodeOutputs
from dreamzero_ros.ros.node_requests import NodeRequests, PromptTopic
from dreamzero_ros.ros.plan_views import envelope_and_views
from dreamzero_ros.ros.robot_description import DescriptionWatch, load_description
from dreamzero_ros.ros.ros_compat import add_parameter_callbacks
from dreamzero_ros.ros.task_server import TaskServer

#: Least seconds between two warnings of one kind (an input refusal reason, a slow camera);
#: diagnostics report every change at once.
WARNING_PERIOD = 10.0


class PolicyNode(NodeRequests, LifecycleNode):
    """Lifecycle node running a DreamZero policy (local engine or remote OpenPI server)."""

    def __init__(
        self,
        node_name: str = NODE_NAME,
        stop_requested: threading.Event | None = None,
        **kwargs: Any,
    ) -> None:
        """Declare the parameters and the always-present interfaces.

        ``stop_requested`` (set by the process's signal handling) makes a configure that waits
        for engine worker ranks give up at once.

        Raises:
            ValueError: an unknown parameter, or a value of the wrong type or out of range.

        """
        super().__init__(node_name, **kwargs)
        self._stop_requested = stop_requested or threading.Event()
        specs = parameters.declare_parameters(
            self,
            node_config.PARAMETERS,
            lambda unknown: f'{node_name}: {node_config.unknown_parameters_message(unknown)}',
        )
        add_parameter_callbacks(
            self,
            lambda changes: parameters.coerce_parameters(changes, specs),
            self._check_parameter_change,
            self._apply_parameter_change,
        )

        self.settings: NodeSettings | None = None
        #: The robot description read at configure (URDF text and joint limits), or None.
        self.robot_description: RobotDescription | None = None
        self.loop: ControlLoop | None = None
        #: The loaded policy's cameras, state widths and action columns.
        self.layout: RobotLayout | None = None
        self.policy: SerializedPolicy | None = None
        self.lifecycle_state = 'unconfigured'
        self.engine_state = 'unconfigured'
        self.enabled = False
        self.dry_run = bool(self.get_parameter('dry_run').value)
        #: The robot's action groups; their controllers' outputs are :attr:`_outputs`'.
        self.groups: GroupLayout | None = None
        # Made at configure, released at cleanup.
        self._bridge = None
        self._inputs: NodeInputs | None = None
        self._outputs: NodeOutputs | None = None
        self._controllers: ControllerMonitor | None = None
        self._views: ImaginationViews | None = None
        self._description_watch: DescriptionWatch | None = None
        # Made at activate, destroyed at deactivate.
        self._timers: list[Any] = []
        self._jump_handle: Any = None
        # What was last said, so that each change is logged and published once.
        self._last_refusal = ''
        self._refusal_logged = False
        self._last_drop = ''
        self._warnings = RepeatLimiter(WARNING_PERIOD)
        self._refused_enable = ''
        #: The controllers found when commands were last enabled.
        self._enabled_with = ''
        #: What became of the last description published after configure (diagnostics).
        self._description_note = ''

        self._diagnostics = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self._status = (
            self.create_publisher(PolicyStatusMsg, '~/status', 10) if PolicyStatusMsg else None
        )
        self._inference = InferenceWorker(self, self._drain_results)
        PromptTopic(self)
        self.create_subscription(Bool, '~/estop', self._on_estop, 10)
        self.create_service(Trigger, '~/reset', self._on_reset)
        self.create_service(SetBool, '~/enable', self._on_enable)
        self._tasks = TaskServer(self, self)
        self._diagnostics_timer = self.create_timer(
            self.get_parameter('diagnostics_period').value, self.publish_diagnostics
        )

    # ------------------------------------------------------------------------ lifecycle

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Read the parameters, load and warm the policy, subscribe to the inputs."""
        try:
            self.settings = build_settings(
                {spec.name: self.get_parameter(spec.name).value for spec in node_config.PARAMETERS}
            )
            self.robot_description = load_description(
                self, self.settings.robot_description, self._stop_requested.is_set
            )
            loop_config, limits_line = self.settings.loop_for(self.robot_description)
        except ValueError as error:
            self.get_logger().error(f'configure failed: {error}')
            return TransitionCallbackReturn.FAILURE
        self.get_logger().info(limits_line)
        settings = self.settings
        self.destroy_timer(self._diagnostics_timer)
        self._diagnostics_timer = self.create_timer(
            settings.diagnostics_period, self.publish_diagnostics
        )
        try:
            GroupOutputs.check_installed(settings.group_specs)
        except RuntimeError as error:
            self.get_logger().error(f'configure failed: {error}')
            return TransitionCallbackReturn.FAILURE
        try:  # before the policy loads: the joints named by the parameters, in their order
            arm_joints = settings.cache_for(None).arm_joints
            envelope_and_views(self, settings, self.robot_description, arm_joints, views=False)
        except ValueError as error:
            self.get_logger().error(f'configure failed: {error}')
            return TransitionCallbackReturn.FAILURE
        self.engine_state = 'loading'
        self.publish_diagnostics()
        try:
            self.policy = create_policy(
                settings,
                self.get_logger().info,
                self._stop_requested.is_set,
                remote_client=RemoteOpenPIPolicy,
            )
            self.layout = RobotLayout.from_metadata(self.policy.metadata)
            check_policy(settings, self.layout)
            self.groups = settings.group_layout(self.layout)
            arm_joints = self.groups.arm_joints  # the command row's order
            loop_config, _ = settings.loop_for(self.robot_description, arm_joints)
            self._outputs = NodeOutputs(self, settings, self.groups, self._warnings)
            envelope, self._outputs.plan_views = envelope_and_views(
                self, settings, self.robot_description, arm_joints
            )
            self._controllers = ControllerMonitor(
                self,
                self.groups,
                settings.controller_watch,
                loop_config.limits.lower,
                loop_config.limits.upper,
            )
            self.loop = ControlLoop(
                ObservationCache(settings.cache_for(self.layout), decode=decode_image),
                loop_config,
                prompt=settings.prompt,
                session_id=settings.session_id,
                envelope=envelope,
            )
            self.loop.measured_velocities = np.zeros(len(self.groups.velocity_names))
            if settings.engine.warmup:
                self.engine_state = 'warming up'
                seconds = warm_up(self.policy, settings, self.layout)
                self.get_logger().info(f'policy warmed up in {seconds:.2f} s')
            self._start_bridge()
        except Exception as error:  # noqa: BLE001 - any load failure must leave a clean state
            self.engine_state = f'error: {type(error).__name__}: {error}'
            self.get_logger().error(f'configure failed: {self.engine_state}')
            self._release()
            self.publish_diagnostics()
            return TransitionCallbackReturn.FAILURE
        self.engine_state = 'ready'
        self._inference.start(self.policy)
        self._inputs = NodeInputs(self, settings, self.groups)
        if settings.robot_description.source == 'topic':
            self._description_watch = DescriptionWatch(
                self,
                settings.robot_description.topic,
                self.robot_description.urdf,
                self._on_description,
            )
        if settings.views.enabled and policy_keeps_views(self.policy):
            self._views = ImaginationViews(
                self,
                settings.views,
                self.layout.cameras,
                settings.scheduler.step_duration,
                engine_busy=lambda: self.loop is not None and self.loop.in_flight,
            )
        self.enabled = settings.start_enabled
        self._tasks.configure(
            settings.task.input_timeout, settings.task.client_timeout, settings.max_prompt_length
        )
        self.lifecycle_state = 'inactive'
        self.get_logger().info(
            f'configured: {len(self._inputs.cameras)} cameras, commands '
            f'{"enabled" if self.enabled else "disabled until ~/enable"}'
            f'{", dry run" if self.dry_run else ""}'
        )
        self.publish_diagnostics()
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Start a fresh policy session and the control timer."""
        self._reset_session('activate')
        self.loop.forget_plan()  # the first chunk starts from the measured joints
        self._timers.append(
            self.create_timer(1.0 / self.settings.control_rate_hz, self._control_tick)
        )
        tolerance = max(self.settings.skew_limit, 1e-3)
        self._jump_handle = self.get_clock().create_jump_callback(
            JumpThreshold(
                min_forward=None,
                min_backward=Duration(nanoseconds=-round(tolerance * 1e9)),
                on_clock_change=True,
            ),
            post_callback=self._on_time_jump,
        )
        self._inputs.camera_rates.start(self._now())
        self.lifecycle_state = 'active'
        self.publish_diagnostics()
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Hold the current command, stop querying; an answer still in flight is discarded."""
        self._tasks.fail('the node was deactivated')
        self._publish_hold(self.loop.reset(self._now()))
        self._outputs.await_delivery()
        self._destroy_timers()
        self._inputs.camera_rates.stop()
        self.lifecycle_state = 'inactive'
        self.publish_diagnostics()
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Release the policy, the bridge, inputs and outputs."""
        self._release()
        self.lifecycle_state = 'unconfigured'
        self.engine_state = 'unconfigured'
        self.publish_diagnostics()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Hold if active, then release everything."""
        if self.lifecycle_state == 'active':
            self._publish_hold(self.loop.hold(self._now(), 'shutdown'))
            self._outputs.await_delivery()
        self._release()
        self.lifecycle_state = 'finalized'
        return TransitionCallbackReturn.SUCCESS

    def _release(self) -> None:
        self._tasks.release('the node was cleaned up or shut down')
        self._destroy_timers()
        for part in (self._outputs, self._inputs, self._views, self._description_watch):
            if part is not None:
                part.destroy()
        self._outputs = self._inputs = self._views = self._description_watch = None
        self._controllers = None
        self._description_note = ''
        self._inference.stop()
        if self._bridge is not None:
            self._bridge.stop()
            self._bridge = None
        if self.policy is not None:
            self.policy.close()
            self.policy = None

    def _destroy_timers(self) -> None:
        for timer in self._timers:
            self.destroy_timer(timer)
        self._timers = []
        if self._jump_handle is not None:
            self._jump_handle.unregister()
            self._jump_handle = None

    # ------------------------------------------------------------------------ set-up

    def _start_bridge(self) -> None:
        settings = self.settings
        if not settings.openpi_bridge.enabled:
            return
        from dreamzero_ros.openpi.server import OpenPIServer
        from dreamzero_ros.openpi.server_config import ServerConfig

        config = ServerConfig(
            host=settings.openpi_bridge.host,
            port=settings.openpi_bridge.port,
            api_key=read_api_key(
                settings.openpi_bridge.api_key_file, BRIDGE_API_KEY_ENV, self.get_logger().warning
            ),
            reserved_sessions=1,  # the node's own control loop
        )
        self._bridge = OpenPIServer(self.policy, config).start()
        self.get_logger().info(f'OpenPI bridge serving the policy on {self._bridge.url}')

    # ------------------------------------------------------------------------ inputs

    def _read_inputs(self, now: float) -> None:
        """Hand the messages received since the last read to the cache (``now``: receipt)."""
        plan_views = self._outputs.plan_views
        self._inputs.read(now, self.loop, self._controllers, plan_views, self._note_input)

    def _note_input(self, problem: Refusal | Drop | None) -> None:
        """Log a refused or dropped input; diagnostics at once when its reason changes."""
        if isinstance(problem, Refusal):
            self._note_refusal(problem)
        elif problem is not None:
            self.get_logger().warning(f'message dropped: {problem}', throttle_duration_sec=2.0)
            if problem.reason.value != self._last_drop:
                self._last_drop = problem.reason.value
                self.publish_diagnostics()

    def _note_refusal(self, refusal: Refusal) -> None:
        """Log a refusal and publish diagnostics at once when its reason changes."""
        if refusal.reason.value != self._last_refusal:
            self._last_refusal = refusal.reason.value
            suffix = self._warnings.admit(refusal.reason.value, time.monotonic())
            self._refusal_logged = suffix is not None
            if self._refusal_logged:
                self.get_logger().warning(f'input refused: {refusal}{suffix}')
            self.publish_diagnostics()

    # ------------------------------------------------------------------------ control

    @property
    def commanding(self) -> bool:
        """True when trajectories reach the controller."""
        return self.lifecycle_state == 'active' and self.enabled and not self.dry_run

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _control_tick(self) -> None:
        read_at = time.perf_counter()
        now = self._now()
        self._read_inputs(now)
        fault = self._controllers.check(self.commanding)
        if fault is not None:  # before anything else goes out
            self.get_logger().error(f'controller fault: {fault}: holding every group')
            self._set_enabled(False, f'controller fault ({fault})')
        self._check_and_query(now, read_at)
        refusal = self.loop.last_refusal
        self._tasks.tick('' if refusal is None else str(refusal))
        command = self.loop.command_at(now)
        self._outputs.tick(now, command, self.commanding, bool(self.loop.holding))

    def _check_and_query(self, now: float, read_at: float) -> None:
        """Hold if the input went bad; otherwise hand the next observation to the worker.

        ``read_at``: ``perf_counter`` at the start of the input read before this check.
        """
        result = self.loop.poll(now)
        if result.time_jump:
            self._start_over_after_jump(result.hold)
            return
        if result.refusal is not None:
            self._note_refusal(result.refusal)
        elif self._last_refusal and not self.loop.paused:  # paused: inputs not checked
            self._last_refusal = ''
            if self._refusal_logged:  # its refusal was logged
                self.get_logger().info('input usable again')
        self._publish_hold(result.hold)
        if result.query is not None:
            self.engine_state = 'inferring'
            options = self._views.request() if self._views is not None else {}
            self._inference.submit(result.query, read_at, options)

    def _drain_results(self) -> None:
        """Executor thread: use every finished query; after a chunk, start the next one at once."""
        chunk_arrived = False
        for query, future in self._inference.finished():
            now = self._now()
            if self.loop is None:
                continue
            if future.cancelled() or future.exception() is not None:
                error = future.exception() if not future.cancelled() else RuntimeError('cancelled')
                self.engine_state = f'error: {type(error).__name__}: {error}'
                self.get_logger().error(f'policy failed: {error}')
                self._publish_hold(self.loop.on_error(query, error, now))
                self._tasks.fail(f'policy error: {error}')
                self.publish_diagnostics()
                continue
            self.engine_state = 'ready'
            answer: Answer = future.result()
            chunk = dataclasses.replace(
                answer.chunk, actions=self.layout.command_rows(answer.chunk.actions)
            )
            outcome = self.loop.on_chunk(query, chunk, now)
            published = self.lifecycle_state == 'active' and self._outputs.publish_chunk(
                query, chunk, outcome, self.commanding
            )
            if published:
                self.loop.chunk_to_publish.record(time.perf_counter() - answer.finished, now)
                self._tasks.chunk_executed(str(outcome.envelope or ''))
            if self._views is not None:  # after the trajectory: decoded in the views' thread
                self._views.on_chunk(chunk)
            self.loop.observation_to_query.record(answer.query_delay, now)
            chunk_arrived = True
        if chunk_arrived and self.lifecycle_state == 'active':
            read_at = time.perf_counter()
            now = self._now()
            self._read_inputs(now)
            self._check_and_query(now, read_at)

    def _publish_hold(self, plan: ActionPlan | None) -> None:
        """While active: send a hold plan to the preview, and to the controllers if commanding."""
        if self.lifecycle_state == 'active':
            self._outputs.publish_hold(plan, self.commanding)

    # ------------------------------------------------------------------------ task host

    def command_state(self) -> CommandState:
        """Whether the node is active and its commands reach the controller (~/run_task)."""
        return CommandState(self.lifecycle_state == 'active', self.enabled, self.dry_run)

    def now(self) -> float:
        """The node's clock, seconds."""
        return self._now()

    def begin_task(self, instruction: str) -> None:
        """A task starts: its instruction is the prompt, in a fresh policy session."""
        self._publish_hold(self.loop.set_prompt(instruction, self._now()))
        self.loop.resume()
        self._reset_session(f'task {abbreviate(instruction)!r}')

    def end_task(self, reason: str) -> None:
        """A task ended: hold (braking a motion in force) and query no more."""
        if self.loop is not None:
            self._publish_hold(self.loop.pause(self._now(), reason))
            self.publish_diagnostics()

    # ------------------------------------------------------------------------ diagnostics

    def publish_diagnostics(self) -> None:
        """Publish /diagnostics (and ~/status where the interfaces are built)."""
        if self.loop is None:
            return
        now = self._now()
        rates = self._inputs.camera_rates.rates(now) if self._inputs is not None else []
        for rate in rates:
            if not rate.slow:
                continue
            suffix = self._warnings.admit(f'camera {rate.camera}', time.monotonic())
            if suffix is not None:
                hint = self._inputs.publisher_problem(rate.camera)
                self.get_logger().warning(f'{rate}{suffix}: {hint}')
        report = build_report(
            self.loop,
            now,
            lifecycle_state=self.lifecycle_state,
            engine_state=self.engine_state,
            enabled=self.enabled,
            dry_run=self.dry_run,
            task=abbreviate(self._tasks.instruction),
            camera_rates=rates,
            fault=str(self._controllers.watch.fault or '') if self._controllers else '',
        )
        if self._views is not None:
            report = dataclasses.replace(
                report, values=report.values + self._views.counters.values()
            )
        if self._description_note:
            note = (('robot_description', self._description_note),)
            report = dataclasses.replace(report, values=report.values + note)
        if self._controllers is not None:
            report = dataclasses.replace(report, values=report.values + self._controllers.values())
        goal_failures = self._outputs.controllers.goal_failures if self._outputs else {}
        if goal_failures:
            failures = tuple(
                (f'{group}.goal_failures', str(count)) for group, count in goal_failures.items()
            )
            report = dataclasses.replace(report, values=report.values + failures)
        self._diagnostics.publish(
            conversions.diagnostics_msg(now, f'{self.get_name()}: policy', report)
        )
        if self._status is not None:
            self._status.publish(conversions.policy_status_msg(now, report))
