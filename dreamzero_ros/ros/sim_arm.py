# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A simulated ros2_control robot: joint_trajectory_controllers, grippers and a mobile base.

``dreamzero-sim-arm`` stands in for a robot and its controllers in tests and the demo. It
subscribes to ``<controller>/joint_trajectory`` (trajectory_msgs/JointTrajectory), rejects what
joint_trajectory_controller would reject (logged, and the reason published on ``~/rejected``),
follows accepted trajectories by time as JTC does (core/motion/jtc.py) and publishes
``joint_states`` (arm joints and the gripper joint, positions and velocities) at ``rate_hz``, so
that a policy node's loop closes; ``/diagnostics`` (status ``<node>: <controller>``) counts the
trajectories accepted and rejected, every second and at each trajectory. The gripper is commanded
through ``gripper.interface``: a trajectory_msgs/JointTrajectory topic (a gripper trajectory
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
which a point of ``table.links`` (forward kinematics, core/robot/kinematics.py; by default the
points the policy node's envelope checks: the flange and both fingertips) was below ``table.height``
in ``table.frame``, and the lowest point reached. Its command is checked as a Franka checks
the 1 kHz command of its real-time interface (core/control/command_check.py): the follower's
positions every millisecond against the description's position and speed limits and
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
controller. A topic without a namespace (``cmd_vel``) stays on the ``sim_arm`` node. Whoever
spins the simulated robot spins :meth:`SimArm.nodes`, the controllers' too. Action goals
run as coroutines that wait for the next update: any number of them may run at once without
holding an executor thread.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
import sys
import threading
from typing import Any, ClassVar

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
import numpy as np
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, String
from trajectory_msgs.msg import JointTrajectory

from dreamzero_ros.core.config.sim_arm_parameters import SimArmParameters
from dreamzero_ros.core.control.command_check import CommandLimits, FollowerCheck
from dreamzero_ros.core.control.status_report import ERROR, OK, StatusReport
from dreamzero_ros.core.motion.jtc import ControllerRules, TrajectoryFollower, validate
from dreamzero_ros.core.observations.messages import to_ns
from dreamzero_ros.core.robot.action_groups import GroupSpec, load_groups, single_arm_groups
from dreamzero_ros.core.robot.controller_identity import controller_node
from dreamzero_ros.core.robot.gripper import GripperConfig
from dreamzero_ros.core.robot.kinematics import LinkPoints
from dreamzero_ros.core.robot.robot_description import RobotDescription
from dreamzero_ros.engine.embodiment import EMBODIMENTS_DIR
from dreamzero_ros.parameter_schema import build, parameter_specs
from dreamzero_ros.ros.conversions import ROS_MESSAGES, diagnostics_msg, trajectory_from_msg
from dreamzero_ros.ros.description_tf import NO_TF, description_tf
from dreamzero_ros.ros.parameters import declare_parameters
from dreamzero_ros.ros.sim_action_servers import (
    serve_follow_joint_trajectory,
    serve_gripper_command,
)
from dreamzero_ros.ros.sim_controllers import (
    SimBase,
    SimGripper,
    TrajectoryController,
    odometry_msg,
)
from dreamzero_ros.ros.sim_robot_main import RobotCommand

#: ``hardware_id`` of the simulated arm's diagnostics (the policy node's is ``dreamzero``).
HARDWARE_ID = 'dreamzero_sim_arm'


class SimArm(Node):
    """The simulated robot: every group's controller.

    A subclass that moves the joints itself (``dreamzero-sim``: physics) sets ``TIMER_DRIVEN``
    False, calls the controllers from its own loop and overrides :meth:`gripper_reached`.
    """

    #: Whether a timer at ``rate_hz`` moves the joints (:meth:`_tick`).
    TIMER_DRIVEN = True
    #: The parameters the node declares (a subclass adds its own): others are refused.
    PARAMETERS: ClassVar[type[SimArmParameters]] = SimArmParameters

    def __init__(self, node_name: str = 'sim_arm', **kwargs: Any) -> None:
        #: The controller nodes, by fully qualified name (see the module's docstring). Set first:
        #: a refused parameter ends ``__init__``, and rclpy 9's shutdown then destroys the node.
        self.controllers: dict[str, Node] = {}
        super().__init__(node_name, **kwargs)
        specs = declare_parameters(self, parameter_specs(self.PARAMETERS))
        #: The parameters, read once at the start (``seed`` alone changes later).
        values = {name: self.get_parameter(name).value for name in specs}
        self.settings = build(self.PARAMETERS, values)
        #: The node's clock at its start: its internal times are seconds since (exact to
        #: nanoseconds, as the 1 kHz checks need).
        self._epoch_ns = self.get_clock().now().nanoseconds
        settings = self.settings
        controller = settings.controller
        if settings.action_groups:
            groups = load_groups(settings.action_groups, EMBODIMENTS_DIR)
        else:
            groups = single_arm_groups(
                settings.joints,
                f'{controller}/joint_trajectory',
                settings.gripper.joint,
                settings.gripper.interface,
                settings.gripper.name,
                GripperConfig(),
                0.0,
                0.5,
            )
        self.accepted = 0
        self.rejected = 0
        self.last_rejection = ''
        self.table_height = settings.table.height
        #: The single arm's description and the points checked against the table; a group
        #: layout (action_groups) has neither.
        self.description = ''
        self.table_points: LinkPoints | None = None
        if not settings.action_groups:
            path = settings.robot_description_file
            self.description = RobotDescription.parse(  # bounded before pinocchio reads it
                _read_description(path), source=path or 'the packaged Panda'
            ).urdf
            self.table_points = LinkPoints(
                self.description,
                settings.joints,
                settings.table.links,
                np.array(settings.table.link_offsets),
                settings.table.frame,
            )
        #: A Franka's checks of the single arm's 1 kHz command (None for a group layout).
        self.check: FollowerCheck | None = None
        self._reported_violation = False
        #: Updates with a point below the table; the lowest point reached (link, z).
        self.below_table = 0
        self.lowest: tuple[str, float] = ('', np.inf)
        #: Guards the controllers' state (followers, grippers, bases) and the table checks.
        self.lock = threading.Lock()
        self._last_update = self.now()
        self.callback_group = ReentrantCallbackGroup()
        self.joint_groups: list[TrajectoryController] = []
        self.grippers: list[SimGripper] = []
        self.bases: list[SimBase] = []
        self._states: dict[str, Any] = {}
        self._odometry: dict[str, Any] = {}
        #: Futures that the next update completes (the action goals waiting for it).
        self._waiting: list[Future] = []
        self._rejections = self.create_publisher(String, '~/rejected', 10)
        self._diagnostics = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        if self.description and settings.publish_robot_description:
            latched = QoSProfile(
                depth=1,
                reliability=ReliabilityPolicy.RELIABLE,
                durability=DurabilityPolicy.TRANSIENT_LOCAL,
            )
            self._description = self.create_publisher(String, 'robot_description', latched)
            self._description.publish(String(data=self.description))
        self._tf = None
        tf_wanted = bool(self.description and settings.publish_tf and self.TIMER_DRIVEN)
        if tf_wanted:
            self._tf = description_tf(self, self.description)
        #: Said in the ready line: why the link frames are not on tf though they should be.
        self._tf_note = NO_TF if tf_wanted and self._tf is None else ''
        self._status_name = f'{self.get_name()}: {controller}'
        self._create_groups(groups, bool(settings.action_groups))
        if self.description:
            self.check = self._command_check(self.joint_groups[0].follower)
        if self.TIMER_DRIVEN:
            self.create_timer(
                1.0 / settings.rate_hz, self._tick, callback_group=self.callback_group
            )
        self.create_timer(1.0, self.publish_diagnostics)

    # ------------------------------------------------------------------------ set-up

    def _create_groups(self, specs: tuple[GroupSpec, ...], from_groups: bool) -> None:
        joints = [j for spec in specs if spec.output != 'gripper' for j in spec.joints]
        initial = list(self.settings.initial_positions)
        if from_groups and len(initial) != len(joints):
            initial = [0.0] * len(joints)
        starts = iter(initial)
        for spec in specs:
            topic = spec.state_topic or self.settings.joint_states_topic
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
        settings = self.settings
        rules = ControllerRules(
            spec.joints,
            allow_partial_joints_goal=settings.allow_partial_joints_goal,
            allow_nonzero_velocity_at_trajectory_end=(
                settings.allow_nonzero_velocity_at_trajectory_end
            ),
        )
        group = TrajectoryController(spec, rules, start)
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
            serve_follow_joint_trajectory(self, host, group)

    def nodes(self) -> tuple[Node, ...]:
        """The nodes to spin: this one, then its controllers'."""
        return (self, *self.controllers.values())

    def destroy_node(self) -> None:
        """Destroy the controllers' nodes, then this one."""
        for controller in self.controllers.values():
            controller.destroy_node()
        self.controllers.clear()
        super().destroy_node()

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
        rate = self.settings.rate_hz
        tf_note = f'; {self._tf_note}' if self._tf_note else ''
        return f'ready: {", ".join(parts) or "nothing"}; joint states at {rate:g} Hz{tf_note}'

    def _add_gripper(self, spec: GroupSpec, from_groups: bool) -> None:
        initial = self.settings.gripper.initial_position
        position = spec.gripper.open_position if from_groups else initial
        gripper = SimGripper(spec, float(position))
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
            serve_gripper_command(self, host, name, gripper)

    def _add_base(self, spec: GroupSpec) -> None:
        base = SimBase(spec)
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
            self.settings.limits.max_acceleration,
            self.settings.limits.max_jerk,
        )
        return FollowerCheck(follower, limits, self.now())

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
                described = ParameterDescriptor(description=f'{key} of the controller.')
                node.declare_parameter(key, value, described)
        return node

    def next_update(self) -> Future:
        """A future that the next update of the simulation completes."""
        future = Future()
        with self.lock:
            self._waiting.append(future)
        return future

    def now(self) -> float:
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

    def _set_target(self, gripper: SimGripper, position: float) -> None:
        with self.lock:
            gripper.target = float(position)

    def _on_gripper_trajectory(self, gripper: SimGripper, msg: JointTrajectory) -> None:
        joint = gripper.spec.gripper_joint
        if joint in msg.joint_names and msg.points:
            index = list(msg.joint_names).index(joint)
            self._set_target(gripper, msg.points[-1].positions[index])

    def gripper_reached(self, gripper: SimGripper) -> bool:
        """Whether a gripper goal is done (under the lock): the fingers at their target."""
        return abs(gripper.position - gripper.target) < 1e-6

    def _on_twist(self, base: SimBase, msg: Twist) -> None:
        with self.lock:
            base.command = msg
            base.commanded_at = self.now()

    def _on_trajectory(self, group: TrajectoryController, msg: JointTrajectory) -> None:
        if not self.check_trajectory(group, msg):
            self.accept(group, msg)
        self.publish_diagnostics()

    def check_trajectory(self, group: TrajectoryController, msg: JointTrajectory) -> str:
        """Why JTC would reject ``msg`` now (logged, published and counted), or ''."""
        reason = validate(trajectory_from_msg(msg, self._epoch_ns), group.rules, self.now())
        if reason:
            if len(self.joint_groups) > 1:
                reason = f'{group.spec.name}: {reason}'
            self.rejected += 1
            group.rejected += 1
            self.last_rejection = reason
            self.get_logger().error(f'trajectory rejected: {reason}')
            self._rejections.publish(String(data=reason))
        return reason

    def accept(self, group: TrajectoryController, msg: JointTrajectory) -> int:
        """Follow ``msg`` from now on; the number of the goal it preempts the others with."""
        now = self.now()
        trajectory = trajectory_from_msg(msg, self._epoch_ns)
        with self.lock:
            if self.check is not None and group.follower is self.check.follower:
                self.check.accept(trajectory, now)
            else:
                group.follower.update(now)
                group.follower.accept(trajectory, now)
            self.accepted += 1
            group.accepted += 1
            group.generation += 1
            return group.generation

    # ------------------------------------------------------------------------ state

    def publish_diagnostics(self) -> None:
        """``/diagnostics``: trajectories accepted and rejected, the table, the 1 kHz checks."""
        with self.lock:
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
                self._epoch_ns * 1e-9 + self.now(), self._status_name, report, HARDWARE_ID
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
        now = self.now()
        states: dict[str, tuple[list, list, list]] = {}
        default_topic = self.settings.joint_states_topic
        odometry = []
        with self.lock:
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
            step = self.settings.gripper.speed * elapsed
            for gripper in self.grippers:
                delta = float(np.clip(gripper.target - gripper.position, -step, step))
                gripper.position += delta
                names, positions, velocities = states.setdefault(
                    gripper.spec.state_topic or default_topic, ([], [], [])
                )
                names.append(gripper.spec.gripper_joint)
                positions.append(gripper.position)
                velocities.append(delta / elapsed if elapsed > 0 else 0.0)
            timeout = self.settings.base_timeout
            for base in self.bases:
                command = base.move(now, elapsed, timeout)
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
                odometry_msg(self._stamp(now), base.pose, command)
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


def _read_description(path: str) -> str:
    """The URDF in ``path``, or the packaged Franka Panda's."""
    if path:
        try:
            return Path(path).read_text()
        except OSError as error:
            raise ValueError(f'robot_description_file {path!r}: {error}') from None
    return (resources.files('dreamzero_ros') / 'descriptions' / 'panda.urdf').read_text()


#: ``dreamzero-sim-arm``: its command line (``build_parser``) and console script (``main``).
COMMAND = RobotCommand('dreamzero-sim-arm', __doc__, SimArmParameters, SimArm)
build_parser = COMMAND.build_parser
main = COMMAND.main


if __name__ == '__main__':
    sys.exit(main())
