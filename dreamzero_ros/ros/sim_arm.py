# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A simulated ros2_control robot: joint_trajectory_controllers, grippers and a mobile base.

``dreamzero-sim-arm`` stands in for a robot and its controllers in tests and the demo. It
subscribes to ``<controller>/joint_trajectory`` (trajectory_msgs/JointTrajectory), rejects what
joint_trajectory_controller would reject (logged, and the reason published on ``~/rejected``),
follows accepted trajectories by time as JTC does (core/jtc.py) and publishes ``joint_states``
(arm joints and the gripper joint, positions and velocities) at ``rate_hz``, so that a policy
node's loop closes; ``/diagnostics`` (status ``<node>: <controller>``) counts the trajectories
accepted and rejected, every second and at each trajectory. The gripper is commanded through
``gripper.interface``: a trajectory_msgs/JointTrajectory topic (a gripper trajectory
controller: the last point is the target; the default, which needs only the ROS 2 wheels), a
``control_msgs/action/GripperCommand`` action server (as franka_gripper's ``gripper_action`` or
ros2_control's GripperActionController; needs control_msgs), a std_msgs/Float64 topic, or none.
The fingers move towards their target at ``gripper.speed``. Once up it logs a ``ready:`` line;
its diagnostics carry ``hardware_id`` ``dreamzero_sim_arm``.

The arm has a robot description (the packaged Franka Panda URDF unless
``robot_description_file`` names another), published on ``robot_description`` (transient local)
as robot_state_publisher does, with its link frames on ``/tf`` and ``/tf_static`` from the joint
states (``publish_tf``: :mod:`~dreamzero_ros.ros.description_tf`), so that RViz's RobotModel and
Foxglove's URDF layer show the arm; it stands at a table: ``/diagnostics`` reports every update at
which a point of ``table.links`` (forward kinematics, core/kinematics.py; by default the points
the policy node's envelope checks: the flange and both fingertips) was below ``table.height``
in ``table.frame``, and the lowest point reached. Its command is checked as a Franka checks
the 1 kHz command of its real-time interface (core/command_check.py): the follower's positions
every millisecond against the description's position and speed limits and
``limits.max_acceleration`` / ``limits.max_jerk`` (finite differences), and the acceleration
jump wherever a trajectory takes over or a segment ends; ``/diagnostics`` carries the largest
values per joint beside the limits and the count of each error a Franka would abort the motion
with (``joint_motion_generator_acceleration_discontinuity``, ...), ERROR and one logged line
once there is one (the simulated arm keeps moving).

With ``action_groups`` (a groups file or a shipped embodiment tag, as the policy node's) it
serves every group of that layout instead: a joint_trajectory_controller per trajectory group
(on the group's ``target``, its joints only: a JointTrajectory topic, or for output
``follow_joint_trajectory`` a control_msgs/action/FollowJointTrajectory server that validates a
goal as the topic, succeeds when its last point is reached and cancels it when the next goal
preempts it, as JTC does; needs control_msgs), a gripper per gripper group (its ``interface``
and ``target``), and per twist group a base that integrates geometry_msgs/Twist on ``target``
into a pose and publishes nav_msgs/Odometry on the group's ``odometry`` topic (``odom`` when it
names none); a base stops when no Twist came for ``base_timeout``. Joint states are published
on each group's ``state_topic`` (or ``joint_states_topic``). The single arm above is the
one-group case of the same code; the description and the table are the single arm's only.

Each controller is a node of its own, named as ros2_control names it (the namespace of its
topic or action: ``left_arm_controller`` for ``left_arm_controller/joint_trajectory``; the
group's ``controller`` where it names one), with JTC's ``joints`` or a gripper controller's
``joint`` parameter, so that the policy node and ``dreamzero-preflight`` recognise it as a real
controller. A topic without a namespace (``cmd_vel``) stays on the ``sim_arm`` node. Action goals
run as coroutines that wait for the next update: any number of them may run at once without
holding an executor thread.
"""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path
import sys
import threading
from typing import Any, ClassVar

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
import numpy as np
import rclpy
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, String
from trajectory_msgs.msg import JointTrajectory

from dreamzero_ros.cli_options import ListingHelpFormatter, new_parser
from dreamzero_ros.core.action_groups import GroupSpec, load_groups, single_arm_groups
from dreamzero_ros.core.command_check import CommandLimits, FollowerCheck
from dreamzero_ros.core.controller_identity import controller_node
from dreamzero_ros.core.envelope import EnvelopeConfig
from dreamzero_ros.core.gripper import GripperConfig
from dreamzero_ros.core.jtc import ControllerRules, TrajectoryFollower, validate
from dreamzero_ros.core.kinematics import LinkPoints
from dreamzero_ros.core.messages import to_ns
from dreamzero_ros.core.panda import PANDA_MAX_ACCELERATION, PANDA_MAX_JERK
from dreamzero_ros.core.process_lifetime import ParentWatchdog
from dreamzero_ros.core.robot_description import RobotDescription
from dreamzero_ros.core.status_report import ERROR, OK, StatusReport
from dreamzero_ros.engine.embodiment import EMBODIMENTS_DIR
from dreamzero_ros.ros.conversions import ROS_MESSAGES, diagnostics_msg, trajectory_from_msg
from dreamzero_ros.ros.description_tf import NO_TF, description_tf
from dreamzero_ros.ros.parameters import refuse_unknown_overrides
from dreamzero_ros.ros.ros_arguments import tool_arguments

#: Franka Panda "ready" pose: the default start of the simulated arm.
PANDA_READY = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]
GRIPPER_INTERFACES = ('action', 'float64', 'joint_trajectory', 'none')
#: The points checked against the table: those the policy node's envelope checks (the
#: Panda's flange and both fingertips), so that both report the same table.
TABLE_POINTS = EnvelopeConfig()
#: The exit codes, in --help.
EXIT_CODES_HELP = 'exit codes: 0 stopped (Ctrl-C), 2 invalid arguments or parameters'
#: ``hardware_id`` of the simulated arm's diagnostics (the policy node's is ``dreamzero``).
HARDWARE_ID = 'dreamzero_sim_arm'

PARAMETERS: dict[str, tuple[Any, str]] = {
    'joints': ([f'panda_joint{i}' for i in range(1, 8)], 'Joints of the arm controller.'),
    'initial_positions': (PANDA_READY, 'Start positions of the joints, rad.'),
    'controller': ('joint_trajectory_controller', 'Controller name (topic namespace).'),
    'allow_partial_joints_goal': (False, 'JTC: accept trajectories naming some of the joints.'),
    'allow_nonzero_velocity_at_trajectory_end': (
        False,
        'JTC: accept trajectories whose last point moves.',
    ),
    'joint_states_topic': ('joint_states', 'sensor_msgs/JointState output.'),
    'rate_hz': (100.0, 'Update and joint_states rate, Hz.'),
    'gripper.joint': ('panda_finger_joint1', 'Gripper joint in joint_states; empty: no gripper.'),
    'gripper.interface': (
        'joint_trajectory',
        f'One of: {", ".join(GRIPPER_INTERFACES)} (action needs control_msgs).',
    ),
    'gripper.name': (
        'gripper_controller/joint_trajectory',
        'Action name (action) or topic (float64, joint_trajectory) of the gripper command.',
    ),
    'gripper.initial_position': (0.04, 'Start position of the gripper joint (Franka: open).'),
    'gripper.speed': (0.1, 'Finger speed, joint units per second.'),
    'robot_description_file': ('', 'URDF of the arm; empty: the packaged Franka Panda.'),
    'publish_robot_description': (
        True,
        'Publish the description on robot_description (transient local), as '
        'robot_state_publisher does.',
    ),
    'publish_tf': (
        True,
        "Publish the description's link frames on /tf (moving joints, with each joint state) "
        'and /tf_static (fixed joints), as robot_state_publisher does; needs tf2_msgs.',
    ),
    'table.height': (
        0.0,
        'Height of the table plane in table.frame, m: points of table.links below it are '
        'reported on /diagnostics.',
    ),
    'table.frame': ('panda_link0', 'Link of the description the table height is given in.'),
    'table.links': (
        list(TABLE_POINTS.links),
        'Links whose points are checked against the table (as envelope.links: the flange and '
        'fingertips).',
    ),
    'table.link_offsets': (
        TABLE_POINTS.offsets.ravel().tolist(),
        'x, y, z of each checked point in its link, m, 3 per link (Panda fingertips: 0.045).',
    ),
    'limits.max_acceleration': (
        list(PANDA_MAX_ACCELERATION),
        'Acceleration limit of each arm joint, rad/s^2, for the checks of the 1 kHz command '
        '(Panda datasheet); position and velocity limits come from the description.',
    ),
    'limits.max_jerk': (
        list(PANDA_MAX_JERK),
        'Jerk limit of each arm joint, rad/s^3, for the checks of the 1 kHz command (Panda '
        'datasheet).',
    ),
    'action_groups': (
        '',
        'Serve every group of this groups file or shipped embodiment tag (agibot, yam) '
        'instead of the single arm and gripper above; joints start at initial_positions when '
        'it has one value per trajectory joint, else at 0, grippers at their open position.',
    ),
    'base_timeout': (0.5, 'A base stops when no Twist came for this long, s.'),
}


class _JointGroup:
    """One simulated joint_trajectory_controller: its rules, follower and counts."""

    def __init__(self, spec: GroupSpec, rules: ControllerRules, start: np.ndarray) -> None:
        self.spec = spec
        self.rules = rules
        self.follower = TrajectoryFollower(rules.joints, start)
        self.accepted = 0
        self.rejected = 0
        #: Counts the trajectories accepted: an action goal runs while it is the newest.
        self.generation = 0


class _Gripper:
    """One simulated gripper joint moving towards its target."""

    def __init__(self, spec: GroupSpec, position: float) -> None:
        self.spec = spec
        self.position = position
        self.target = position
        self.velocity = 0.0
        self.goal_generation = 0


class _Base:
    """A mobile base integrating its last Twist command into a planar pose."""

    def __init__(self, spec: GroupSpec) -> None:
        self.spec = spec
        self.command = Twist()
        self.commanded_at = -np.inf
        self.pose = np.zeros(3)  # x, y, yaw


class SimArm(Node):
    """The simulated robot: every group's controller.

    A subclass that moves the joints itself (``dreamzero-sim``: physics) sets ``TIMER_DRIVEN``
    False, calls the controllers from its own loop and overrides :meth:`_gripper_reached`.
    """

    #: Whether a timer at ``rate_hz`` moves the joints (:meth:`_tick`).
    TIMER_DRIVEN = True
    #: Every parameter the node declares (a subclass adds its own): others are refused.
    DECLARED: ClassVar[dict[str, tuple[Any, str]]] = PARAMETERS

    def __init__(self, node_name: str = 'sim_arm', **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        refuse_unknown_overrides(self, self.DECLARED)
        #: The node's clock at its start: its internal times are seconds since (exact to
        #: nanoseconds, as the 1 kHz checks need).
        self._epoch_ns = self.get_clock().now().nanoseconds
        for name, (default, description) in PARAMETERS.items():
            self.declare_parameter(name, default, _descriptor(description))
        value = self._value
        if value('gripper.interface') not in GRIPPER_INTERFACES:
            raise ValueError(f'gripper.interface must be one of {GRIPPER_INTERFACES}')
        controller = value('controller')
        if value('action_groups'):
            specs = load_groups(value('action_groups'), EMBODIMENTS_DIR)
        else:
            specs = single_arm_groups(
                value('joints'),
                f'{controller}/joint_trajectory',
                value('gripper.joint'),
                value('gripper.interface'),
                value('gripper.name'),
                GripperConfig(),
                0.0,
                0.5,
            )
        self.accepted = 0
        self.rejected = 0
        self.last_rejection = ''
        self.table_height = float(value('table.height'))
        #: The single arm's description and the points checked against the table; a group
        #: layout (action_groups) has neither.
        self.description = ''
        self.table_points: LinkPoints | None = None
        if not value('action_groups'):
            path = value('robot_description_file')
            self.description = RobotDescription.parse(  # bounded before pinocchio reads it
                _read_description(path), source=path or 'the packaged Panda'
            ).urdf
            self.table_points = LinkPoints(
                self.description,
                value('joints'),
                value('table.links'),
                np.array(value('table.link_offsets')),
                value('table.frame'),
            )
        #: A Franka's checks of the single arm's 1 kHz command (None for a group layout).
        self.check: FollowerCheck | None = None
        self._reported_violation = False
        #: Updates with a point below the table; the lowest point reached (link, z).
        self.below_table = 0
        self.lowest: tuple[str, float] = ('', np.inf)
        self._lock = threading.Lock()
        self._last_update = self._now()
        self._group = ReentrantCallbackGroup()
        self.joint_groups: list[_JointGroup] = []
        self.grippers: list[_Gripper] = []
        self.bases: list[_Base] = []
        self._states: dict[str, Any] = {}
        self._odometry: dict[str, Any] = {}
        #: The controller nodes, by fully qualified name (see the module's docstring).
        self.controllers: dict[str, Node] = {}
        #: Futures that the next update completes (the action goals waiting for it).
        self._waiting: list[Future] = []
        self._rejections = self.create_publisher(String, '~/rejected', 10)
        self._diagnostics = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        if self.description and value('publish_robot_description'):
            latched = QoSProfile(
                depth=1,
                reliability=ReliabilityPolicy.RELIABLE,
                durability=DurabilityPolicy.TRANSIENT_LOCAL,
            )
            self._description = self.create_publisher(String, 'robot_description', latched)
            self._description.publish(String(data=self.description))
        self._tf = None
        tf_wanted = bool(self.description and value('publish_tf') and self.TIMER_DRIVEN)
        if tf_wanted:
            self._tf = description_tf(self, self.description)
        #: Said in the ready line: why the link frames are not on tf though they should be.
        self._tf_note = NO_TF if tf_wanted and self._tf is None else ''
        self._status_name = f'{self.get_name()}: {controller}'
        self._create_groups(specs, bool(value('action_groups')))
        if self.description:
            self.check = self._command_check(self.joint_groups[0].follower)
        if self.TIMER_DRIVEN:
            self.create_timer(1.0 / value('rate_hz'), self._tick, callback_group=self._group)
        self.create_timer(1.0, self._publish_diagnostics)

    # ------------------------------------------------------------------------ set-up

    def _create_groups(self, specs: tuple[GroupSpec, ...], from_groups: bool) -> None:
        value = self._value
        joints = [j for spec in specs if spec.output != 'gripper' for j in spec.joints]
        initial = list(value('initial_positions'))
        if from_groups and len(initial) != len(joints):
            initial = [0.0] * len(joints)
        starts = iter(initial)
        for spec in specs:
            topic = spec.state_topic or value('joint_states_topic')
            if topic not in self._states and (spec.joints or spec.output == 'gripper'):
                self._states[topic] = self.create_publisher(JointState, topic, 10)
            if spec.output in ('joint_trajectory', 'follow_joint_trajectory', 'none'):
                start = np.array([next(starts) for _ in spec.joints])
                if not spec.joints:
                    continue
                self._add_joint_group(spec, start, from_groups)
            elif spec.output == 'gripper':
                self._add_gripper(spec, from_groups)
            elif spec.output == 'twist':
                self._add_base(spec)

    def _add_joint_group(self, spec: GroupSpec, start: np.ndarray, from_groups: bool) -> None:
        value = self._value
        rules = ControllerRules(
            spec.joints,
            allow_partial_joints_goal=value('allow_partial_joints_goal'),
            allow_nonzero_velocity_at_trajectory_end=value(
                'allow_nonzero_velocity_at_trajectory_end'
            ),
        )
        group = _JointGroup(spec, rules, start)
        self.joint_groups.append(group)
        host = self._controller(spec, joints=list(spec.joints))
        if spec.output == 'joint_trajectory':
            host.create_subscription(
                JointTrajectory,
                self.resolve_topic_name(spec.target),
                lambda msg, group=group: self._on_trajectory(group, msg),
                10,
            )
        elif spec.output == 'follow_joint_trajectory':
            try:
                from control_msgs.action import FollowJointTrajectory
            except ImportError as error:
                raise RuntimeError(
                    f'action group {spec.name!r}: follow_joint_trajectory needs control_msgs; '
                    'install it (ros-<distro>-control-msgs) or use output joint_trajectory'
                ) from error
            from rclpy.action import ActionServer, CancelResponse, GoalResponse

            self._trajectory_type = FollowJointTrajectory

            def check(request: Any, group: _JointGroup = group) -> GoalResponse:
                reason = self._check_trajectory(group, request.trajectory)
                return GoalResponse.REJECT if reason else GoalResponse.ACCEPT

            async def execute(handle: Any, group: _JointGroup = group) -> Any:
                return await self._execute_trajectory_goal(group, handle)

            ActionServer(
                host,
                FollowJointTrajectory,
                self.resolve_topic_name(spec.target),
                execute,
                goal_callback=check,
                cancel_callback=lambda goal: CancelResponse.ACCEPT,
                callback_group=self._group,
            )

    def start(self) -> None:
        """Start moving (the timer does, once spinning)."""

    def stop(self) -> None:
        """Stop moving (the timer stops with the executor)."""

    def ready_line(self) -> str:
        """What the simulated robot serves, logged once it is up."""
        parts = [f'{len(g.rules.joints)} joints on {g.spec.target}' for g in self.joint_groups]
        parts += [
            f'gripper {g.spec.gripper_joint} by {g.spec.gripper_interface} on {g.spec.target}'
            for g in self.grippers
        ]
        parts += [f'a base on {b.spec.target}' for b in self.bases]
        rate = self._value('rate_hz')
        tf_note = f'; {self._tf_note}' if self._tf_note else ''
        return f'ready: {", ".join(parts) or "nothing"}; joint states at {rate:g} Hz{tf_note}'

    def _add_gripper(self, spec: GroupSpec, from_groups: bool) -> None:
        value = self._value
        position = spec.gripper.open_position if from_groups else value('gripper.initial_position')
        gripper = _Gripper(spec, float(position))
        self.grippers.append(gripper)
        interface, name = spec.gripper_interface, self.resolve_topic_name(spec.target)
        host = self
        if interface == 'joint_trajectory':  # a gripper joint_trajectory_controller
            host = self._controller(spec, joints=[spec.gripper_joint])
        elif interface != 'none':  # GripperActionController's parameter
            host = self._controller(spec, joint=spec.gripper_joint)
        if interface == 'float64':
            host.create_subscription(
                Float64, name, lambda msg: self._set_target(gripper, msg.data), 10
            )
        elif interface == 'joint_trajectory':
            host.create_subscription(
                JointTrajectory, name, lambda msg: self._on_gripper_trajectory(gripper, msg), 10
            )
        elif interface == 'action':
            try:
                from control_msgs.action import GripperCommand
            except ImportError as error:
                raise RuntimeError(
                    'gripper.interface action needs control_msgs (GripperCommand); install it '
                    '(ros-<distro>-control-msgs) or choose float64 / joint_trajectory'
                ) from error
            from rclpy.action import ActionServer, CancelResponse

            self._gripper_type = GripperCommand

            async def execute(handle: Any) -> Any:
                return await self._execute_gripper_goal(gripper, handle)

            ActionServer(
                host,
                GripperCommand,
                name,
                execute,
                cancel_callback=lambda goal: CancelResponse.ACCEPT,
                callback_group=self._group,
            )

    def _add_base(self, spec: GroupSpec) -> None:
        base = _Base(spec)
        self.bases.append(base)
        self._controller(spec).create_subscription(
            Twist, self.resolve_topic_name(spec.target), lambda msg: self._on_twist(base, msg), 10
        )
        topic = spec.odometry or 'odom'
        self._odometry[spec.name] = self.create_publisher(Odometry, topic, 10)

    def _command_check(self, follower: TrajectoryFollower) -> FollowerCheck:
        """A Franka's checks of the arm's command: the description's positions and speeds."""
        limits = CommandLimits.of_description(
            RobotDescription.parse(self.description),
            follower.joints,
            self._value('limits.max_acceleration'),
            self._value('limits.max_jerk'),
        )
        return FollowerCheck(follower, limits, self._now())

    def _controller(self, spec: GroupSpec, **parameters: Any) -> Node:
        """The node serving ``spec``'s target: its controller's, or this one without a name.

        ``parameters`` (JTC's ``joints``, a gripper controller's ``joint``) are the
        controller's; a controller shared by several groups gets their joints together.
        """
        name = spec.controller or controller_node(spec.target)
        if not name:
            return self
        resolved = self.resolve_topic_name(name)
        node = self.controllers.get(resolved)
        if node is None:
            namespace, _, leaf = resolved.rpartition('/')
            node = Node(
                leaf,
                namespace=namespace or '/',
                context=self.context,
                use_global_arguments=False,  # launch's __node remap names the sim_arm node only
            )
            self.controllers[resolved] = node
        for key, value in parameters.items():
            if node.has_parameter(key) and isinstance(value, list):
                value = [*node.get_parameter(key).value, *value]
                node.set_parameters([Parameter(key, value=value)])
            elif not node.has_parameter(key):
                node.declare_parameter(key, value, _descriptor(f'{key} of the controller.'))
        return node

    def _next_update(self) -> Future:
        """A future that the next update of the simulation completes."""
        future = Future()
        with self._lock:
            self._waiting.append(future)
        return future

    def _value(self, name: str) -> Any:
        return self.get_parameter(name).value

    def _now(self) -> float:
        """Seconds since the node's start on its clock."""
        return (self.get_clock().now().nanoseconds - self._epoch_ns) * 1e-9

    def _stamp(self, now: float) -> Any:
        """``builtin_interfaces/Time`` of ``now`` (seconds since the start)."""
        return ROS_MESSAGES.time(self._epoch_ns + to_ns(now))

    # ------------------------------------------------------------------------ commands

    @property
    def gripper_position(self) -> float:
        """Position of the first gripper (the single arm's)."""
        return self.grippers[0].position if self.grippers else 0.0

    def _set_target(self, gripper: _Gripper, position: float) -> None:
        with self._lock:
            gripper.target = float(position)

    def _on_gripper_trajectory(self, gripper: _Gripper, msg: JointTrajectory) -> None:
        joint = gripper.spec.gripper_joint
        if joint in msg.joint_names and msg.points:
            index = list(msg.joint_names).index(joint)
            self._set_target(gripper, msg.points[-1].positions[index])

    async def _execute_gripper_goal(self, gripper: _Gripper, goal_handle: Any) -> Any:
        """Move to the goal's position; a newer goal preempts this one (it is aborted)."""
        with self._lock:
            gripper.goal_generation += 1
            generation = gripper.goal_generation
            gripper.target = float(goal_handle.request.command.position)
        label = f' ({gripper.spec.name})' if len(self.grippers) > 1 else ''
        self.get_logger().info(f'gripper goal{label}: position {gripper.target:.4f}')
        result = self._gripper_type.Result()
        while rclpy.ok():
            with self._lock:
                preempted = generation != gripper.goal_generation
                position, reached = gripper.position, self._gripper_reached(gripper)
            result.position, result.reached_goal = position, reached
            if preempted:
                goal_handle.abort()
                return result
            if goal_handle.is_cancel_requested:
                goal_handle.canceled()
                return result
            if result.reached_goal:
                goal_handle.succeed()
                return result
            feedback = self._gripper_type.Feedback(position=position)
            goal_handle.publish_feedback(feedback)
            await self._next_update()
        goal_handle.abort()
        return result

    def _gripper_reached(self, gripper: _Gripper) -> bool:
        """Whether a gripper goal is done (under the lock): the fingers at their target."""
        return abs(gripper.position - gripper.target) < 1e-6

    def _on_twist(self, base: _Base, msg: Twist) -> None:
        with self._lock:
            base.command = msg
            base.commanded_at = self._now()

    def _on_trajectory(self, group: _JointGroup, msg: JointTrajectory) -> None:
        if not self._check_trajectory(group, msg):
            self._accept(group, msg)
        self._publish_diagnostics()

    def _check_trajectory(self, group: _JointGroup, msg: JointTrajectory) -> str:
        """Why JTC would reject ``msg`` now (logged, published and counted), or ''."""
        reason = validate(trajectory_from_msg(msg, self._epoch_ns), group.rules, self._now())
        if reason:
            if len(self.joint_groups) > 1:
                reason = f'{group.spec.name}: {reason}'
            self.rejected += 1
            group.rejected += 1
            self.last_rejection = reason
            self.get_logger().error(f'trajectory rejected: {reason}')
            self._rejections.publish(String(data=reason))
        return reason

    def _accept(self, group: _JointGroup, msg: JointTrajectory) -> int:
        """Follow ``msg`` from now on; the number of the goal it preempts the others with."""
        now = self._now()
        trajectory = trajectory_from_msg(msg, self._epoch_ns)
        with self._lock:
            if self.check is not None and group.follower is self.check.follower:
                self.check.accept(trajectory, now)
            else:
                group.follower.update(now)
                group.follower.accept(trajectory, now)
            self.accepted += 1
            group.accepted += 1
            group.generation += 1
            return group.generation

    async def _execute_trajectory_goal(self, group: _JointGroup, goal_handle: Any) -> Any:
        """Follow an accepted goal until its last point (succeeded) or the next goal (canceled)."""
        from rclpy.impl.implementation_singleton import rclpy_implementation

        generation = self._accept(group, goal_handle.request.trajectory)
        self._publish_diagnostics()
        result = self._trajectory_type.Result()
        while rclpy.ok():
            with self._lock:
                preempted = generation != group.generation
                end = group.follower.end_time
            if preempted or goal_handle.is_cancel_requested:
                # JTC cancels a preempted goal with INVALID_GOAL and this string
                if not goal_handle.is_cancel_requested:
                    # as rclpy's server does on a cancel request
                    goal_handle._update_state(rclpy_implementation.GoalEvent.CANCEL_GOAL)
                result.error_code = result.INVALID_GOAL if preempted else result.SUCCESSFUL
                result.error_string = (
                    'Current goal cancelled due to new incoming action.' if preempted else ''
                )
                goal_handle.canceled()
                return result
            if end is not None and self._now() >= end:
                result.error_code = result.SUCCESSFUL
                goal_handle.succeed()
                return result
            await self._next_update()
        goal_handle.abort()
        return result

    # ------------------------------------------------------------------------ state

    def _publish_diagnostics(self) -> None:
        with self._lock:
            gripper = self.gripper_position
            below, (lowest_link, lowest_z) = self.below_table, self.lowest
            command = self._command_values()
        values = [
            ('trajectories_accepted', str(self.accepted)),
            ('trajectories_rejected', str(self.rejected)),
            ('last_rejection', self.last_rejection),
            ('gripper_position', f'{gripper:.4f}'),
            ('table_height', f'{self.table_height:.4f}'),
            ('below_table', str(below)),
            ('lowest_link', lowest_link),
            ('lowest_z', f'{lowest_z:.4f}'),
        ]
        if len(self.joint_groups) > 1:
            values += [
                (f'{g.spec.name}.trajectories_accepted', str(g.accepted)) for g in self.joint_groups
            ]
        values += command
        message = f'{self.rejected} rejected' if self.rejected else 'every trajectory accepted'
        if below:
            message += f'; {below} updates below the table (lowest: {lowest_link})'
        first = self.check.monitor.first if self.check is not None else ''
        if first:
            message += f'; a Franka would abort: {first}'
        level = ERROR if self.rejected or below or first else OK
        report = StatusReport(level, message, tuple(values))
        self._diagnostics.publish(
            diagnostics_msg(
                self._epoch_ns * 1e-9 + self._now(), self._status_name, report, HARDWARE_ID
            )
        )

    def _command_values(self) -> list[tuple[str, str]]:
        """Diagnostics of the 1 kHz command's checks (under the lock); logs a first violation."""
        if self.check is None:
            return []
        monitor = self.check.monitor
        if monitor.first and not self._reported_violation:
            self._reported_violation = True
            self.get_logger().error(f'the 1 kHz command breaks a Franka limit: {monitor.first}')
        return monitor.diagnostics()

    def _tick(self) -> None:
        now = self._now()
        states: dict[str, tuple[list, list, list]] = {}
        default_topic = self._value('joint_states_topic')
        odometry = []
        with self._lock:
            elapsed = max(0.0, now - self._last_update)
            self._last_update = now
            if self.check is not None:
                self.check.advance(now)
            for group in self.joint_groups:
                group.follower.update(now)
                names, positions, velocities = states.setdefault(
                    group.spec.state_topic or default_topic, ([], [], [])
                )
                names += group.rules.joints
                positions += list(group.follower.position)
                velocities += list(group.follower.velocity)
            if self.table_points is not None:
                self._check_table(self.joint_groups[0].follower.position)
            step = self._value('gripper.speed') * elapsed
            for gripper in self.grippers:
                delta = float(np.clip(gripper.target - gripper.position, -step, step))
                gripper.position += delta
                names, positions, velocities = states.setdefault(
                    gripper.spec.state_topic or default_topic, ([], [], [])
                )
                names.append(gripper.spec.gripper_joint)
                positions.append(gripper.position)
                velocities.append(delta / elapsed if elapsed > 0 else 0.0)
            timeout = self._value('base_timeout')
            for base in self.bases:
                command = base.command if now - base.commanded_at <= timeout else Twist()
                base.pose += _planar_step(base.pose[2], command, elapsed)
                odometry.append((base, command))
            waiting, self._waiting = self._waiting, []
        for topic, (names, positions, velocities) in states.items():
            msg = JointState(name=names, position=positions, velocity=velocities)
            msg.header.stamp = self._stamp(now)
            self._states[topic].publish(msg)
            if self._tf is not None:
                self._tf.publish(msg.header.stamp, names, positions)
        for base, command in odometry:
            self._odometry[base.spec.name].publish(
                _odometry_msg(self._stamp(now), base.pose, command)
            )
        for future in waiting:  # the action goals see this update
            future.set_result(None)

    def _check_table(self, joints: np.ndarray) -> None:
        """Record whether a checked point is below the table at ``joints`` (under the lock)."""
        heights = self.table_points.positions(joints)[0, :, 2]
        lowest = int(np.argmin(heights))
        if heights[lowest] < self.lowest[1]:
            self.lowest = (self.table_points.links[lowest], float(heights[lowest]))
        if heights[lowest] < self.table_height:
            self.below_table += 1


def _planar_step(yaw: float, twist: Twist, seconds: float) -> np.ndarray:
    """Change of ``(x, y, yaw)`` over ``seconds`` at ``twist`` (body frame)."""
    forward, sideways = twist.linear.x, twist.linear.y
    dx = (forward * np.cos(yaw) - sideways * np.sin(yaw)) * seconds
    dy = (forward * np.sin(yaw) + sideways * np.cos(yaw)) * seconds
    return np.array([dx, dy, twist.angular.z * seconds])


def _odometry_msg(stamp: Any, pose: np.ndarray, twist: Twist) -> Odometry:
    msg = Odometry()
    msg.header.stamp = stamp
    msg.header.frame_id = 'odom'
    msg.child_frame_id = 'base_link'
    msg.pose.pose.position.x, msg.pose.pose.position.y = float(pose[0]), float(pose[1])
    msg.pose.pose.orientation.z = float(np.sin(pose[2] / 2))
    msg.pose.pose.orientation.w = float(np.cos(pose[2] / 2))
    msg.twist.twist = twist
    return msg


def _read_description(path: str) -> str:
    """The URDF in ``path``, or the packaged Franka Panda's."""
    if path:
        try:
            return Path(path).read_text()
        except OSError as error:
            raise ValueError(f'robot_description_file {path!r}: {error}') from None
    return (resources.files('dreamzero_ros') / 'descriptions' / 'panda.urdf').read_text()


def _descriptor(description: str) -> Any:
    from rcl_interfaces.msg import ParameterDescriptor

    return ParameterDescriptor(description=description)


def parameters_parser(
    prog: str, description: str, parameters: dict[str, tuple[Any, str]]
) -> argparse.ArgumentParser:
    """Command-line interface of a simulated robot: ROS arguments only, its parameters listed."""
    lines = ['parameters (set with --ros-args -p name:=value or --params-file file.yaml):']
    for name, (default, text) in parameters.items():
        lines.append(f'  {name} (default {default!r}): {text}')
    lines.append(f'\n{EXIT_CODES_HELP}')
    return new_parser(
        prog,
        description,
        usage='%(prog)s [-h] [--ros-args -p name:=value ...]',
        epilog='\n'.join(lines),
        formatter_class=ListingHelpFormatter,
    )


def build_parser() -> argparse.ArgumentParser:
    """Command-line interface of ``dreamzero-sim-arm``: ROS arguments only."""
    return parameters_parser('dreamzero-sim-arm', __doc__, PARAMETERS)


def run_robot(
    prog: str, parser: argparse.ArgumentParser, make: type[SimArm], args: list[str] | None
) -> int:
    """Run a simulated robot node (``make()``) until Ctrl-C; a bad parameter ends in one line.

    It ends with its parent process too (``ros2 launch`` killed: no simulated robot left).
    """
    watchdog = ParentWatchdog(None).start()
    argv = sys.argv[1:] if args is None else args
    try:
        parser.parse_args(tool_arguments(argv))
    except ValueError as error:
        parser.error(str(error))
    rclpy.init(args=[prog, *argv])
    watchdog.on_lost = rclpy.try_shutdown  # leave the graph, then exit
    node = None
    try:
        node = make()
        node.start()
    except (OSError, RuntimeError, ValueError) as error:
        print(f'{prog}: {error}', file=sys.stderr)
        if node is not None:
            node.stop()
            node.destroy_node()
        rclpy.try_shutdown()
        return 2
    executor = MultiThreadedExecutor(num_threads=2)
    for each in (node, *node.controllers.values()):
        executor.add_node(each)
    node.get_logger().info(node.ready_line())
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.stop()
        executor.shutdown()
        for controller in node.controllers.values():
            controller.destroy_node()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


def main(args: list[str] | None = None) -> int:
    """Console script ``dreamzero-sim-arm``."""
    return run_robot('dreamzero-sim-arm', build_parser(), SimArm, args)


if __name__ == '__main__':
    sys.exit(main())
