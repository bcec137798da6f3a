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
as robot_state_publisher does, and stands at a table: ``/diagnostics`` reports every update at
which a point of ``table.links`` (forward kinematics, core/kinematics.py) was below
``table.height`` in ``table.frame``, and the lowest point reached.

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
"""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path
import sys
import threading
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
import numpy as np
import rclpy
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, String
from trajectory_msgs.msg import JointTrajectory

from dreamzero_ros.cli_options import ListingHelpFormatter, new_parser
from dreamzero_ros.core.action_groups import GroupSpec, load_groups, single_arm_groups
from dreamzero_ros.core.envelope import PANDA_FINGERTIP
from dreamzero_ros.core.gripper import GripperConfig
from dreamzero_ros.core.jtc import ControllerRules, TrajectoryFollower, validate
from dreamzero_ros.core.kinematics import LinkPoints
from dreamzero_ros.core.status_report import ERROR, OK, StatusReport
from dreamzero_ros.engine.embodiment import EMBODIMENTS_DIR
from dreamzero_ros.ros.conversions import diagnostics_msg, to_time, trajectory_from_msg

#: Franka Panda "ready" pose: the default start of the simulated arm.
PANDA_READY = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]
GRIPPER_INTERFACES = ('action', 'float64', 'joint_trajectory', 'none')
#: The Panda's links checked against the table: the arm from link 2, the hand and fingertips.
PANDA_TABLE_LINKS = [*(f'panda_link{i}' for i in range(2, 9)), 'panda_hand', 'panda_leftfinger',
                     'panda_rightfinger']  # fmt: skip
PANDA_TABLE_OFFSETS = [0.0] * 24 + [0.0, 0.0, PANDA_FINGERTIP] * 2
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
    'table.height': (
        0.0,
        'Height of the table plane in table.frame, m: points of table.links below it are '
        'reported on /diagnostics.',
    ),
    'table.frame': ('panda_link0', 'Link of the description the table height is given in.'),
    'table.links': (PANDA_TABLE_LINKS, 'Links whose points are checked against the table.'),
    'table.link_offsets': (
        PANDA_TABLE_OFFSETS,
        'x, y, z of each checked point in its link, m, 3 per link (Panda fingertips: 0.045).',
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
    """The simulated robot: every group's controller."""

    def __init__(self, node_name: str = 'sim_arm', **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
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
            self.description = _read_description(value('robot_description_file'))
            self.table_points = LinkPoints(
                self.description,
                value('joints'),
                value('table.links'),
                np.array(value('table.link_offsets')),
                value('table.frame'),
            )
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
        self._status_name = f'{self.get_name()}: {controller}'
        self._create_groups(specs, bool(value('action_groups')))
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
        if spec.output == 'joint_trajectory':
            self.create_subscription(
                JointTrajectory,
                spec.target,
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

            ActionServer(
                self,
                FollowJointTrajectory,
                spec.target,
                lambda handle, group=group: self._execute_trajectory_goal(group, handle),
                goal_callback=check,
                cancel_callback=lambda goal: CancelResponse.ACCEPT,
                callback_group=self._group,
            )

    def ready_line(self) -> str:
        """What the simulated robot serves, logged once it is up."""
        parts = [f'{len(g.rules.joints)} joints on {g.spec.target}' for g in self.joint_groups]
        parts += [
            f'gripper {g.spec.gripper_joint} by {g.spec.gripper_interface} on {g.spec.target}'
            for g in self.grippers
        ]
        parts += [f'a base on {b.spec.target}' for b in self.bases]
        rate = self._value('rate_hz')
        return f'ready: {", ".join(parts) or "nothing"}; joint states at {rate:g} Hz'

    def _add_gripper(self, spec: GroupSpec, from_groups: bool) -> None:
        value = self._value
        position = spec.gripper.open_position if from_groups else value('gripper.initial_position')
        gripper = _Gripper(spec, float(position))
        self.grippers.append(gripper)
        interface, name = spec.gripper_interface, spec.target
        if interface == 'float64':
            self.create_subscription(
                Float64, name, lambda msg: self._set_target(gripper, msg.data), 10
            )
        elif interface == 'joint_trajectory':
            self.create_subscription(
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
            ActionServer(
                self,
                GripperCommand,
                name,
                lambda handle: self._execute_gripper_goal(gripper, handle),
                cancel_callback=lambda goal: CancelResponse.ACCEPT,
                callback_group=self._group,
            )

    def _add_base(self, spec: GroupSpec) -> None:
        base = _Base(spec)
        self.bases.append(base)
        self.create_subscription(Twist, spec.target, lambda msg: self._on_twist(base, msg), 10)
        topic = spec.odometry or 'odom'
        self._odometry[spec.name] = self.create_publisher(Odometry, topic, 10)

    def _value(self, name: str) -> Any:
        return self.get_parameter(name).value

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

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

    def _execute_gripper_goal(self, gripper: _Gripper, goal_handle: Any) -> Any:
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
                position, target = gripper.position, gripper.target
            result.position, result.reached_goal = position, abs(position - target) < 1e-6
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
            time.sleep(0.02)
        goal_handle.abort()
        return result

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
        reason = validate(trajectory_from_msg(msg), group.rules, self._now())
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
        with self._lock:
            group.follower.update(now)
            group.follower.accept(trajectory_from_msg(msg), now)
            self.accepted += 1
            group.accepted += 1
            group.generation += 1
            return group.generation

    def _execute_trajectory_goal(self, group: _JointGroup, goal_handle: Any) -> Any:
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
            time.sleep(0.01)
        goal_handle.abort()
        return result

    # ------------------------------------------------------------------------ state

    def _publish_diagnostics(self) -> None:
        with self._lock:
            gripper = self.gripper_position
            below, (lowest_link, lowest_z) = self.below_table, self.lowest
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
        message = f'{self.rejected} rejected' if self.rejected else 'every trajectory accepted'
        if below:
            message += f'; {below} updates below the table (lowest: {lowest_link})'
        report = StatusReport(ERROR if self.rejected or below else OK, message, tuple(values))
        self._diagnostics.publish(
            diagnostics_msg(self._now(), self._status_name, report, HARDWARE_ID)
        )

    def _tick(self) -> None:
        now = self._now()
        states: dict[str, tuple[list, list, list]] = {}
        default_topic = self._value('joint_states_topic')
        odometry = []
        with self._lock:
            elapsed = max(0.0, now - self._last_update)
            self._last_update = now
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
        for topic, (names, positions, velocities) in states.items():
            msg = JointState(name=names, position=positions, velocity=velocities)
            msg.header.stamp = to_time(now)
            self._states[topic].publish(msg)
        for base, command in odometry:
            self._odometry[base.spec.name].publish(_odometry_msg(now, base.pose, command))

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


def _odometry_msg(now: float, pose: np.ndarray, twist: Twist) -> Odometry:
    msg = Odometry()
    msg.header.stamp = to_time(now)
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


def build_parser() -> argparse.ArgumentParser:
    """Command-line interface of ``dreamzero-sim-arm``: ROS arguments only."""
    lines = ['parameters (set with --ros-args -p name:=value or --params-file file.yaml):']
    for name, (default, description) in PARAMETERS.items():
        lines.append(f'  {name} (default {default!r}): {description}')
    return new_parser(
        'dreamzero-sim-arm',
        __doc__,
        usage='%(prog)s [-h] [--ros-args -p name:=value ...]',
        epilog='\n'.join(lines),
        formatter_class=ListingHelpFormatter,
    )


def main(args: list[str] | None = None) -> int:
    """Console script ``dreamzero-sim-arm``."""
    argv = sys.argv[1:] if args is None else args
    build_parser().parse_args(rclpy.utilities.remove_ros_args(['prog', *argv])[1:])
    rclpy.init(args=['dreamzero-sim-arm', *argv])
    try:
        node = SimArm()
    except (RuntimeError, ValueError) as error:
        print(f'dreamzero-sim-arm: {error}', file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    executor = MultiThreadedExecutor(num_threads=2)
    executor.add_node(node)
    node.get_logger().info(node.ready_line())
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
