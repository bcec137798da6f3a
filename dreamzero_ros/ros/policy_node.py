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
The console script's ``main`` is in :mod:`dreamzero_ros.ros.policy_node_main`.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
import dataclasses
from dataclasses import dataclass
import queue
import threading
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from nav_msgs.msg import Odometry
import numpy as np
from rcl_interfaces.msg import SetParametersResult
from rclpy.clock import ClockChange, JumpThreshold, TimeJump
from rclpy.duration import Duration
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CompressedImage, Image, JointState
from std_msgs.msg import Bool, Float64MultiArray, String
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import JointTrajectory

from dreamzero_ros.core import node_config
from dreamzero_ros.core.action_groups import GroupLayout
from dreamzero_ros.core.api_keys import BRIDGE_API_KEY_ENV, read_api_key
from dreamzero_ros.core.camera_rates import CameraRateMonitor
from dreamzero_ros.core.chunk_scheduler import ActionPlan
from dreamzero_ros.core.control_loop import ChunkOutcome, ControlLoop, Query
from dreamzero_ros.core.envelope import Envelope
from dreamzero_ros.core.imagination import policy_keeps_views
from dreamzero_ros.core.messages import to_ns
from dreamzero_ros.core.node_config import NODE_NAME, build_settings
from dreamzero_ros.core.node_settings import NodeSettings
from dreamzero_ros.core.node_validation import check_policy
from dreamzero_ros.core.observation_cache import Drop, ObservationCache, Refusal
from dreamzero_ros.core.plan_geometry import description_fk, plan_frames
from dreamzero_ros.core.policy_factory import create_policy, warm_up
from dreamzero_ros.core.repeat_limiter import RepeatLimiter
from dreamzero_ros.core.robot_description import RobotDescription
from dreamzero_ros.core.robot_layout import RobotLayout
from dreamzero_ros.core.serialized_policy import SerializedPolicy
from dreamzero_ros.core.status_report import build_report
from dreamzero_ros.core.task_runner import CommandState, abbreviate, prompt_too_long
from dreamzero_ros.openpi.remote_policy import RemoteOpenPIPolicy
from dreamzero_ros.policy_types import ActionChunk
from dreamzero_ros.ros import conversions, parameters
from dreamzero_ros.ros.controller_monitor import ControllerMonitor
from dreamzero_ros.ros.conversions import ROS_MESSAGES, ActionChunkMsg, PolicyStatusMsg
from dreamzero_ros.ros.group_outputs import GroupOutputs
from dreamzero_ros.ros.image_decoding import decode_image
from dreamzero_ros.ros.imagination_views import ImaginationViews
from dreamzero_ros.ros.plan_views import PlanViews
from dreamzero_ros.ros.polled_inputs import PolledSubscription
from dreamzero_ros.ros.robot_description import DescriptionWatch, load_description
from dreamzero_ros.ros.ros_compat import SubscriptionEventCallbacks, add_parameter_callbacks
from dreamzero_ros.ros.task_server import TaskServer

#: Least seconds between two warnings of one kind (an input refusal reason, a slow camera);
#: diagnostics report every change at once.
WARNING_PERIOD = 10.0
#: Joint state messages kept between two reads: one control period of a 1 kHz
#: joint_state_broadcaster at control rates down to 4 Hz, so that joint states split over
#: several publishers (arm, gripper) all reach the cache.
JOINT_STATE_QUEUE = 256

LATCHED = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
_SPECS = {spec.name: spec for spec in node_config.PARAMETERS}
#: Longest wait, seconds, for the controller to acknowledge a last hold before going inactive.
DELIVERY_TIMEOUT = 0.25
#: A prompt equal to the last one, read by the other ~/prompt subscription within this many
#: seconds, is the same latched sample (delivered to both), not a new prompt.
DUPLICATE_PROMPT_WINDOW = 1.0


def _volatile_prompt_writer(event: Any) -> None:
    """A volatile ~/prompt publisher: the volatile subscription reads it; nothing to say."""


@dataclass(frozen=True)
class _Answer:
    """A chunk from the worker thread, with the node's own timing (``perf_counter`` seconds).

    Attributes:
        chunk: the policy's answer.
        query_delay: from the start of the input read that built the observation to the start
            of ``policy.infer`` (decode, resize, checks, hand-over to the worker).
        finished: when ``policy.infer`` returned.

    """

    chunk: ActionChunk
    query_delay: float
    finished: float


class PolicyNode(LifecycleNode):
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
        # rclpy keeps the parameter-file and -p values here and ignores those of undeclared
        # parameters: a typo must not pass silently, and an integer given for a double is fine.
        unknown = node_config.unknown_parameters(self._parameter_overrides)
        if unknown:
            raise ValueError(f'{node_name}: {node_config.unknown_parameters_message(unknown)}')
        self._parameter_overrides = parameters.coerce_overrides(self._parameter_overrides, _SPECS)
        for spec in node_config.PARAMETERS:
            parameters.declare(self, spec)
        add_parameter_callbacks(
            self,
            lambda changes: parameters.coerce_parameters(changes, _SPECS),
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
        self._bridge = None
        self._worker: ThreadPoolExecutor | None = None
        self._results: queue.SimpleQueue = queue.SimpleQueue()
        self._cameras: dict[str, PolledSubscription] = {}
        self._joint_states: list[PolledSubscription] = []
        self._odometry: list[tuple[PolledSubscription, Any]] = []
        self._outputs: dict[str, Any] = {}
        #: The robot's controllers, one per action group, and their outputs.
        self.groups: GroupLayout | None = None
        self._group_outputs: GroupOutputs | None = None
        self._controllers: ControllerMonitor | None = None
        self._timers: list[Any] = []
        self._last_refusal = ''
        self._refusal_logged = False
        self._warnings = RepeatLimiter(WARNING_PERIOD)
        self._camera_rates: CameraRateMonitor | None = None
        self._last_drop = ''
        self._refused_enable = ''
        #: The controllers found when commands were last enabled.
        self._enabled_with = ''
        self._jump_handle: Any = None
        self._views: ImaginationViews | None = None
        self._plan_views: PlanViews | None = None
        self._description_watch: DescriptionWatch | None = None
        #: What became of the last description published after configure (diagnostics).
        self._description_note = ''

        self._diagnostics = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self._status = (
            self.create_publisher(PolicyStatusMsg, '~/status', 10) if PolicyStatusMsg else None
        )
        self._results_ready = self.create_guard_condition(self._drain_results)
        # ros2 topic pub publishes volatile, which a transient-local reader never matches; a
        # latched prompt (transient local) is read by the second subscription. A volatile
        # publisher is "incompatible" with that one only: rclpy's warning that no messages will
        # be received would be false (the first one receives them), so it is not logged. A
        # latched publisher reaches both: its message is used once.
        self._last_prompt: tuple[str, str, float] | None = None
        self.create_subscription(String, '~/prompt', lambda msg: self._on_prompt(msg, 'v'), 10)
        self.create_subscription(
            String,
            '~/prompt',
            lambda msg: self._on_prompt(msg, 'l'),
            LATCHED,
            event_callbacks=SubscriptionEventCallbacks(incompatible_qos=_volatile_prompt_writer),
        )
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
            self._envelope(settings, settings.cache_for(None).arm_joints, views=False)
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
            envelope = self._envelope(settings, arm_joints)
            self._group_outputs = GroupOutputs(self, self.groups)
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
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix='dreamzero-infer')
        self._create_inputs()
        self._create_outputs()
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
            f'configured: {len(self._cameras)} cameras, commands '
            f'{"enabled" if self.enabled else "disabled until ~/enable"}'
            f'{", dry run" if self.dry_run else ""}'
        )
        self.publish_diagnostics()
        return TransitionCallbackReturn.SUCCESS

    def _envelope(
        self, settings: NodeSettings, arm_joints: tuple[str, ...], views: bool = True
    ) -> Envelope | None:
        """The safety envelope and (with ``views``) the plan views over ``arm_joints``.

        ``arm_joints`` are every arm column's joint (all trajectory groups of a robot with
        several arms), so the envelope's links may lie on any of them. None when
        envelope.enabled is false; the plan views where a description was read and plan.enabled.

        Raises:
            ValueError: the description is missing or lacks a joint, link or frame named.

        """
        urdf = self.robot_description.urdf if self.robot_description is not None else None
        envelope = None
        if settings.envelope.enabled:
            if urdf is None:
                raise ValueError(
                    'envelope.enabled needs the robot description: set '
                    'robot_description.source to topic (robot_state_publisher) or file'
                )
            envelope = Envelope.from_description(urdf, arm_joints, settings.envelope_config)
            if views:
                self.get_logger().info(
                    f'safety envelope on {", ".join(settings.envelope.links)} in '
                    f'{settings.envelope.frame or "the description root"}'
                )
        if urdf is not None and settings.plan.enabled:
            arm = tuple(arm_joints)
            link, frame = plan_frames(urdf, arm, settings.plan.link, settings.envelope.frame)
            envelope_config = dataclasses.replace(settings.envelope_config, frame=frame)
            if not views:
                description_fk(urdf, arm, link, frame)  # raises as the views would
            else:
                self._plan_views = PlanViews.from_description(
                    self, urdf, arm, link, envelope_config, settings.envelope.enabled
                )
        return envelope

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
        self._camera_rates.start(self._now())
        self.lifecycle_state = 'active'
        self.publish_diagnostics()
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Hold the current command, stop querying; an answer still in flight is discarded."""
        self._tasks.fail('the node was deactivated')
        self._publish_hold(self.loop.reset(self._now()))
        self._await_delivery()
        self._destroy_timers()
        self._camera_rates.stop()
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
            self._await_delivery()
        self._release()
        self.lifecycle_state = 'finalized'
        return TransitionCallbackReturn.SUCCESS

    def _release(self) -> None:
        self._tasks.release('the node was cleaned up or shut down')
        self._destroy_timers()
        if self._group_outputs is not None:
            self._group_outputs.destroy()
            self._group_outputs = None
        self._controllers = None
        for camera in self._cameras.values():
            camera.destroy()
        self._cameras = {}
        self._camera_rates = None
        for subscription in (*self._joint_states, *(sub for sub, _ in self._odometry)):
            subscription.destroy()
        self._joint_states, self._odometry = [], []
        for publisher in self._outputs.values():
            if publisher is not None:
                self.destroy_lifecycle_publisher(publisher)
        self._outputs = {}
        if self._views is not None:
            self._views.destroy()
            self._views = None
        if self._plan_views is not None:
            self._plan_views.destroy()
            self._plan_views = None
        if self._description_watch is not None:
            self._description_watch.destroy()
            self._description_watch = None
        self._description_note = ''
        if self._worker is not None:
            self._worker.shutdown(wait=True, cancel_futures=True)
            self._worker = None
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

    def _create_inputs(self) -> None:
        settings = self.settings
        compressed = settings.image_transport == 'compressed'
        for camera, topic in settings.cameras.items():
            self._cameras[camera] = PolledSubscription(
                self,
                CompressedImage if compressed else Image,
                f'{topic}/compressed' if compressed else topic,
                settings.camera_qos.depth,
                settings.camera_qos.reliability,
            )
        self._camera_rates = CameraRateMonitor(settings.camera_rates)
        self._joint_states = [
            PolledSubscription(self, JointState, topic, JOINT_STATE_QUEUE)
            for topic in self.groups.state_topics
        ]
        for group in self.groups.of('twist'):
            if group.spec.odometry:
                subscription = PolledSubscription(self, Odometry, group.spec.odometry, 1)
                self._odometry.append((subscription, group))

    def _create_outputs(self) -> None:
        settings = self.settings
        self._outputs['preview'] = self.create_lifecycle_publisher(
            JointTrajectory, settings.preview_topic, 10
        )
        self._outputs['chunk'] = (
            self.create_lifecycle_publisher(ActionChunkMsg, settings.chunk_topic, 10)
            if ActionChunkMsg
            else None
        )
        self._outputs['step'] = None
        if settings.step_command.enabled:
            step_type = (
                JointState if settings.step_command.type == 'joint_state' else Float64MultiArray
            )
            self._outputs['step'] = self.create_lifecycle_publisher(
                step_type, settings.step_command.topic, 10
            )

    def _start_bridge(self) -> None:
        settings = self.settings
        if not settings.openpi_bridge.enabled:
            return
        from dreamzero_ros.openpi.server import OpenPIServer, ServerConfig

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
        cache = self.loop.cache
        for camera, subscription in self._cameras.items():
            messages = subscription.take()
            self._camera_rates.record(camera, len(messages), now)
            for msg in messages:
                self._note_input(cache.add_image_message(camera, msg, now))
        for subscription in self._joint_states:
            for msg in subscription.take():
                self._note_input(cache.add_joint_state_message(msg, now))
                self._controllers.note_joint_state(msg)
                if self._plan_views is not None:
                    self._plan_views.note_joint_state(msg)
        first = len(self.groups.arm_joints) + len(self.groups.grippers)
        for subscription, group in self._odometry:
            for msg in subscription.take():
                velocities = self._controllers.odometry(group, msg)
                if velocities is not None:
                    columns = [column - first for column in group.columns]
                    self.loop.measured_velocities[columns] = velocities

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

    def _on_time_jump(self, jump: TimeJump) -> None:
        """Clock jump callback (executor thread): a jump back starts over in the new timeline."""
        if self.loop is None or self.lifecycle_state != 'active':
            return
        after = self._now()
        before = after - jump.delta.nanoseconds * 1e-9
        clock_change = jump.clock_change in (
            ClockChange.ROS_TIME_ACTIVATED,
            ClockChange.ROS_TIME_DEACTIVATED,
        )
        if clock_change or self.loop.is_backward_jump(before, after):
            self._start_over_after_jump(self.loop.on_time_jump(before, after))

    def _start_over_after_jump(self, hold: ActionPlan | None) -> None:
        self._publish_hold(hold)
        self._tasks.fail('the clock jumped back')
        self._reset_policy_session(self.loop.holding)
        self.publish_diagnostics()

    def _on_prompt(self, msg: String, reader: str) -> None:
        """A prompt from reader ``v`` (volatile) or ``l`` (latched); one sample reaches both."""
        now = time.monotonic()
        last = self._last_prompt
        self._last_prompt = (msg.data, reader, now)
        if last is not None and last[0] == msg.data and last[1] != reader:
            if now - last[2] < DUPLICATE_PROMPT_WINDOW:
                return  # the same sample through the other subscription
        (result,) = self.set_parameters([Parameter('prompt', Parameter.Type.STRING, msg.data)])
        if not result.successful:
            self.get_logger().warning(f'~/prompt refused: {result.reason}')

    def _on_description(self, urdf: str) -> None:
        """A robot description published after configure: applied at a hold now, or refused.

        Applied: the motion in force brakes to a stop (the hold) and every command after it is
        limited by the new description (joint limits, envelope, plan views). Refused (it does
        not parse, exceeds a bound, lacks an arm joint, its limits or an envelope link, or is
        wider than a typed safety.* limit): the node holds with commands disabled; the
        description in force stays, and enabling again commands by it.
        """
        if self.loop is None or self.robot_description is None:
            return
        settings, arm_joints = self.settings, self.groups.arm_joints
        previous = self.robot_description
        if urdf == previous.urdf:
            self._description_note = f'in force ({previous.source})'
            return
        now = self._now()
        try:
            description = RobotDescription.parse(
                urdf,
                previous.joint_limits_yaml,
                source=previous.source,
                bounds=settings.robot_description.bounds,
            )
            loop_config, limits_line = settings.loop_for(description, arm_joints)
            self.robot_description = description
            self._envelope(settings, arm_joints, views=False)  # raises as the envelope would
        except ValueError as error:
            self.robot_description = previous
            self._description_note = f'refused at {now:.3f} s: {error}'
            self.get_logger().error(
                f'robot description published on {previous.source} refused: {error}; holding '
                'with commands disabled (enabling again commands by the description read at '
                'configure)'
            )
            self._set_enabled(False, 'robot description refusal')
            self.publish_diagnostics()
            return
        self._publish_hold(self.loop.hold(now, 'robot description changed'))
        if self._plan_views is not None:
            self._plan_views.destroy()
            self._plan_views = None
        self.loop.envelope = self._envelope(settings, arm_joints)
        self.loop.config = loop_config
        self._description_note = (
            f'applied at the hold at {now:.3f} s: {description.name!r} from {description.source}'
        )
        self.get_logger().warning(
            f'robot description changed on {description.source}: applied at the hold at '
            f'{now:.3f} s (the motion in force brakes to a stop; every later command is limited '
            f'by it): {limits_line}'
        )
        self.publish_diagnostics()

    def _on_estop(self, msg: Bool) -> None:
        if msg.data:
            self._set_enabled(False, 'e-stop topic')

    def _on_enable(self, request: SetBool.Request, response: SetBool.Response) -> Any:
        if not self._set_enabled(bool(request.data), 'enable service'):
            response.success = False
            response.message = f'commands not enabled: {self._refused_enable}'
            return response
        response.success = True
        response.message = (
            f'commands {"enabled" if self.enabled else "disabled"}'
            + (' (dry_run: nothing reaches the controller)' if self.dry_run else '')
            + ('' if self.lifecycle_state == 'active' else f' (node {self.lifecycle_state})')
            + (
                f'; controllers: {self._enabled_with}'
                if self.enabled and self._enabled_with
                else ''
            )
        )
        return response

    def _on_reset(self, request: Trigger.Request, response: Trigger.Response) -> Any:
        if self.loop is None or self.policy is None:
            response.success, response.message = False, f'node is {self.lifecycle_state}'
            return response
        self._reset_session('reset service')
        response.success = True
        response.message = f'session {self.loop.session_id!r} reset; holding until the next chunk'
        return response

    def _check_parameter_change(self, changes: list[Parameter]) -> SetParametersResult:
        """Refuse bad values, and changes of configure-time parameters unless unconfigured."""
        for change in changes:
            spec = _SPECS.get(change.name)
            if spec is None:  # built into rclpy (use_sim_time, ...)
                continue
            if not spec.runtime and self.lifecycle_state != 'unconfigured':
                return SetParametersResult(
                    successful=False,
                    reason=f'{change.name} is read at configure: set it while the node is '
                    f'unconfigured (it is {self.lifecycle_state}; cleanup first)',
                )
            try:
                spec.check(change.value)
            except ValueError as error:
                return SetParametersResult(successful=False, reason=str(error))
            if change.name == 'session_id' and not change.value:
                return SetParametersResult(successful=False, reason='session_id: empty')
            if change.name == 'prompt':
                cap = self.get_parameter('max_prompt_length').value
                too_long = prompt_too_long('prompt', change.value, cap)
                if too_long:
                    return SetParametersResult(successful=False, reason=too_long)
        return SetParametersResult(successful=True)

    def _apply_parameter_change(self, parameters: list[Parameter]) -> None:
        if self.loop is None:
            return
        for parameter in parameters:
            if parameter.name == 'prompt':
                self._tasks.preempt(f'prompt set to {abbreviate(parameter.value)!r}')
                self._publish_hold(self.loop.set_prompt(parameter.value, self._now()))
                self.loop.resume()  # after a task ended: query again, on this prompt
                self.get_logger().info(f'prompt: {abbreviate(parameter.value)!r}')
            elif parameter.name == 'session_id':
                self.loop.session_id = parameter.value
                self._reset_session('session_id changed')
            elif parameter.name == 'dry_run' and bool(parameter.value) != self.dry_run:
                self._tasks.fail(f'dry_run set to {str(bool(parameter.value)).lower()}')
                if parameter.value:
                    self._publish_hold(self.loop.hold(self._now(), 'dry run'))
                else:
                    self.loop.forget_plan()  # the preview plan was never executed
                self.dry_run = bool(parameter.value)
                self.get_logger().warning(f'dry_run: {self.dry_run}')

    # ------------------------------------------------------------------------ control

    @property
    def commanding(self) -> bool:
        """True when trajectories reach the controller."""
        return self.lifecycle_state == 'active' and self.enabled and not self.dry_run

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _set_enabled(self, enabled: bool, source: str) -> bool:
        """Enable or disable commands; False when enabling is refused (a controller missing)."""
        if enabled == self.enabled:
            return True
        refusal, found = '', ''
        if enabled and self._controllers is not None and not self.dry_run:
            refusal, found = self._controllers.enable_refusal(self.lifecycle_state == 'active')
            unmatched = self._group_outputs.unmatched()
            if not refusal and unmatched:
                refusal = f'action clients not matched with their servers yet: {unmatched}'
        if refusal:
            self.get_logger().error(f'enable refused ({source}): {refusal}')
            self._refused_enable = refusal
            return False
        self._enabled_with = found
        if not enabled:
            self._tasks.fail(f'commands disabled by the {source}')
            if self.loop is not None:
                self._publish_hold(self.loop.hold(self._now(), 'disabled'))
            self.enabled = False
        else:
            if self.loop is not None:
                self.loop.forget_plan()  # the next chunk starts from the measured joints
            if self._controllers is not None:
                self._controllers.watch.restart(time.monotonic())  # an enable clears a fault
            self.enabled = True
        self.get_logger().warning(f'commands {"enabled" if enabled else "DISABLED"} by {source}')
        self.publish_diagnostics()
        return True

    def _reset_session(self, why: str) -> None:
        self._publish_hold(self.loop.reset(self._now()))
        self._reset_policy_session(why)

    def _reset_policy_session(self, why: str) -> None:
        session_id = self.loop.session_id
        if self._worker is not None:
            self._worker.submit(self.policy.reset, session_id)
        self.get_logger().warning(f'session {session_id!r} reset ({why})')

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
        step = self._outputs.get('step')
        command = self.loop.command_at(now)
        if step is not None and command is not None and self.commanding:
            names = self.groups.arm_joints
            arm = command[: len(names)]
            if step.msg_type is Float64MultiArray:
                step.publish(conversions.float_array_msg(arm))
            else:
                step.publish(ROS_MESSAGES.joint_state(to_ns(now), names, arm))
        self._group_outputs.tick(command, self.commanding, bool(self.loop.holding))
        if self._plan_views is not None:  # after the commands
            self._plan_views.publish_executed()

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
            future = self._worker.submit(self._infer, result.query.observation, read_at, options)
            future.add_done_callback(lambda done, query=result.query: self._on_done(query, done))

    def _infer(self, observation: Any, read_at: float, options: dict[str, bool]) -> _Answer:
        """Worker thread: one inference (``options``: what to keep for the views), timed."""
        started = time.perf_counter()
        chunk = self.policy.infer(observation, **options)
        return _Answer(chunk, started - read_at, time.perf_counter())

    def _on_done(self, query: Query, future: Future) -> None:
        """Worker thread: hand the result to the executor thread."""
        self._results.put((query, future))
        self._results_ready.trigger()

    def _drain_results(self) -> None:
        """Executor thread: use every finished query; after a chunk, start the next one at once."""
        chunk_arrived = False
        while True:
            try:
                query, future = self._results.get_nowait()
            except queue.Empty:
                break
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
            answer: _Answer = future.result()
            chunk = dataclasses.replace(
                answer.chunk, actions=self.layout.command_rows(answer.chunk.actions)
            )
            outcome = self.loop.on_chunk(query, chunk, now)
            if self._publish_chunk(query, chunk, outcome):
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

    def _publish_chunk(self, query: Query, chunk: ActionChunk, outcome: ChunkOutcome) -> bool:
        """Publish the raw chunk and the trajectory (or a hold); True if a trajectory went out."""
        if self.lifecycle_state != 'active':
            return False
        settings = self.settings
        names = self.groups.command_names
        stamp = query.observation.stamp
        publisher = self._outputs.get('chunk')
        if publisher is not None and np.asarray(chunk.actions).ndim == 2:
            publisher.publish(
                ROS_MESSAGES.action_chunk(
                    to_ns(stamp),
                    names,
                    self.groups.to_joint_units(chunk.actions),
                    to_ns(settings.scheduler.step_duration or chunk.step_duration),
                    chunk.chunk_id,
                    outcome.latency,
                    query.observation.session_id,
                )
            )
        if outcome.discarded:  # one line per kind and WARNING_PERIOD (counted in diagnostics)
            kind = f'chunk not used: {outcome.discarded.partition(" (")[0]}'
            suffix = self._warnings.admit(kind, time.monotonic())
            if suffix is not None:
                self.get_logger().warning(f'chunk not used: {outcome.discarded}{suffix}')
            self._publish_hold(outcome.plan)
            return False
        plan = outcome.plan
        if outcome.envelope is not None:
            self.get_logger().warning(f'trajectory cut into a hold: {outcome.envelope}')
        self._send_plan(plan, stamp)
        self.get_logger().debug(
            f'chunk {chunk.chunk_id}: latency {outcome.latency * 1000:.0f} ms, '
            f'{outcome.dropped_steps} past steps dropped, blend {outcome.blend_window:.2f} s'
        )
        return True

    def _await_delivery(self) -> None:
        """Wait (briefly) until the controller has acknowledged what was sent, e.g. a last hold."""
        if self._group_outputs is not None:
            self._group_outputs.wait_for_delivery(DELIVERY_TIMEOUT)

    def _send_plan(self, plan: ActionPlan, stamp: float) -> None:
        """Publish ``plan`` as a trajectory stamped ``stamp`` (preview; controller when commanding).

        Every point carries positions, velocities and accelerations: the controller draws the
        plan's own quintic segments.
        """
        arm_names = self.groups.arm_joints
        arm = len(arm_names)
        stamp_ns = to_ns(stamp)
        times = [to_ns(time) - stamp_ns for time in plan.times]
        velocities, accelerations = (
            np.zeros_like(plan.rows) if values is None else values
            for values in (plan.velocities, plan.accelerations)
        )
        msg = ROS_MESSAGES.trajectory(
            stamp_ns,
            arm_names,
            times,
            plan.rows[:, :arm],
            velocities[:, :arm],
            accelerations[:, :arm],
        )
        self._outputs['preview'].publish(msg)
        if self.commanding:
            self._group_outputs.send_trajectory(
                lambda group: ROS_MESSAGES.trajectory(
                    stamp_ns,
                    group.spec.joints,
                    times,
                    group.rows(plan.rows),
                    group.rows(velocities),
                    group.rows(accelerations),
                )
            )
        if self._plan_views is not None:  # after the trajectory
            self._plan_views.on_plan(stamp, plan.times, plan.rows[:, :arm])

    def _publish_hold(self, plan: ActionPlan | None) -> None:
        """Send a hold plan to the preview, and to the controller when commanding.

        A braking hold (several points, starting on the plan in force) goes out as a stamped
        trajectory like a chunk's; a one-point hold (a plan at rest) with a zero stamp, started
        on receipt from the controller's state then.
        """
        if plan is None or self.lifecycle_state != 'active':
            return
        if len(plan.times) > 1:
            self._send_plan(plan, plan.start_time)
            if self.commanding:
                self._group_outputs.stop_bases()
            return
        arm_names = self.groups.arm_joints
        settle = 1.0 / self.settings.control_rate_hz
        msg = ROS_MESSAGES.hold(arm_names, plan.rows[-1][: len(arm_names)], to_ns(settle))
        self._outputs['preview'].publish(msg)
        if self.commanding:
            self._group_outputs.send_hold(plan.rows[-1], to_ns(settle))
        if self._plan_views is not None:
            now = self._now()
            self._plan_views.on_plan(now, [now + settle], plan.rows[-1:, : len(arm_names)])

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
        rates = self._camera_rates.rates(now) if self._camera_rates is not None else []
        for rate in rates:
            if not rate.slow:
                continue
            suffix = self._warnings.admit(f'camera {rate.camera}', time.monotonic())
            if suffix is not None:
                hint = self._cameras[rate.camera].publisher_problem()
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
        if self._group_outputs is not None and self._group_outputs.goal_failures:
            failures = tuple(
                (f'{group}.goal_failures', str(count))
                for group, count in self._group_outputs.goal_failures.items()
            )
            report = dataclasses.replace(report, values=report.values + failures)
        self._diagnostics.publish(
            conversions.diagnostics_msg(now, f'{self.get_name()}: policy', report)
        )
        if self._status is not None:
            self._status.publish(conversions.policy_status_msg(now, report))
