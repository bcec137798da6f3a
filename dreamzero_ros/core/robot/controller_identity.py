# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Which node of the ROS graph is an action group's controller, by ros2_controllers' names.

ros2_control runs every controller as a node named after it, with its interfaces in its private
namespace: joint_trajectory_controller subscribes ``~/joint_trajectory``, publishes
``~/controller_state`` and serves ``~/follow_joint_trajectory``; GripperActionController serves
``~/gripper_cmd``; diff_drive_controller subscribes ``~/cmd_vel`` and publishes ``~/odom``. The
controller of a group whose target is ``left_arm_controller/joint_trajectory`` is therefore the
node ``left_arm_controller``: :func:`controller_node`.

A subscriber of a topic output is the group's controller when its node is the one the group
names (``controller``; default: :func:`controller_node` of the target) or when it also publishes
the group's state topic (``controller_state``; default: JTC's ``<controller>/controller_state``
for a trajectory, a twist group's ``odometry``). A recorder on the command topic is neither. An
action output's controller is the server of its action (where the group names a controller, that
node's server). A group whose target has no namespace and which names neither has no way to tell
a controller from a recorder: any subscriber is taken, and :class:`Finding` says so.

The ROS layer (ros/controller_monitor.py) resolves the names and reads the graph; nothing here
imports ROS.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import dataclasses
from dataclasses import dataclass

from dreamzero_ros.core.robot.action_groups import GroupSpec

__all__ = ['ControllerClaim', 'Finding', 'claim_of', 'controller_node', 'identify']

#: What a group accepts as its controller where nothing names one.
ANY_SUBSCRIBER = 'any subscriber: set the group\'s "controller" to check which'
#: The message type a topic output's controller subscribes with, by output (and interface).
MESSAGE_TYPES = {
    'joint_trajectory': 'trajectory_msgs/msg/JointTrajectory',
    'gripper joint_trajectory': 'trajectory_msgs/msg/JointTrajectory',
    'gripper float64': 'std_msgs/msg/Float64',
    'twist': 'geometry_msgs/msg/Twist',
}


def controller_node(target: str) -> str:
    """The controller ros2_controllers names for a command topic or action: its namespace.

    ``left_arm_controller/joint_trajectory`` -> ``left_arm_controller``; ``cmd_vel`` -> ``''``.
    """
    head, separator, _ = target.rpartition('/')
    return head if separator and head.strip('/~') else ''


@dataclass(frozen=True)
class ControllerClaim:
    """What makes a node a group's controller.

    Attributes:
        group: the group's name.
        output: its output (``joint_trajectory``, ``gripper``, ...), for messages.
        target: the command topic or action.
        action: True for an action output (its server is the controller).
        node: the controller node's name ('' where none is known).
        state_topic: a topic only the controller publishes ('' where none is known).
        named: True where the configuration names the controller (an action server must then
            be that node's).
        message_type: the type a topic output's controller subscribes with.

    """

    group: str
    output: str
    target: str
    action: bool
    node: str = ''
    state_topic: str = ''
    named: bool = False
    message_type: str = ''

    def resolved(self, resolve: Callable[[str], str]) -> ControllerClaim:
        """The claim with its node and state topic fully qualified by ``resolve``.

        The target stays as configured (as messages name it); the ROS layer resolves it when
        it reads the graph.
        """
        return dataclasses.replace(
            self,
            node=resolve(self.node) if self.node else '',
            state_topic=resolve(self.state_topic) if self.state_topic else '',
        )

    def __str__(self) -> str:
        return f'{self.group} ({self.output} {self.target})'


def claim_of(spec: GroupSpec) -> ControllerClaim | None:
    """What identifies the controller of ``spec``; None for a group that commands nothing."""
    output = spec.output
    if output == 'gripper':
        if spec.gripper_interface == 'none':
            return None
        output = f'gripper {spec.gripper_interface}'
    elif output == 'none':
        return None
    node = spec.controller or controller_node(spec.target)
    action = output in ('follow_joint_trajectory', 'gripper action')
    state = spec.controller_state
    if not state and not action:
        if output in ('joint_trajectory', 'gripper joint_trajectory') and node:
            state = f'{node}/controller_state'
        elif output == 'twist':
            state = spec.odometry
    return ControllerClaim(
        spec.name,
        spec.output,
        spec.target,
        action,
        node,
        state,
        bool(spec.controller),
        MESSAGE_TYPES.get(output, ''),
    )


@dataclass(frozen=True)
class Finding:
    """The controller found for a group, or why none was.

    Attributes:
        claim: what was looked for.
        controller: the node taken for the controller ('' none).
        how: how it was recognised (``node name``, ``publishes <topic>``, ``action server``, or
            :data:`ANY_SUBSCRIBER`).
        problem: why no node is the controller ('' when one is).

    """

    claim: ControllerClaim
    controller: str = ''
    how: str = ''
    problem: str = ''

    @property
    def found(self) -> bool:
        """True when a controller was found."""
        return bool(self.controller)

    def __str__(self) -> str:
        if self.found:
            return f'{self.claim.group}: {self.controller} ({self.how})'
        return f'{self.claim}: {self.problem}'


def identify(
    claim: ControllerClaim,
    subscribers: Sequence[str] = (),
    state_publishers: Sequence[str] = (),
    servers: Sequence[str] = (),
    other_types: Sequence[str] = (),
) -> Finding:
    """The controller of ``claim`` among the nodes seen (fully qualified names).

    ``subscribers``: nodes subscribed to a topic output's target with its message type;
    ``state_publishers``: nodes publishing its state topic; ``servers``: nodes serving an
    action output's action; ``other_types``: subscribers of the target with another type
    (``node (type)``), which never receive what the group sends.
    """
    if claim.action:
        if not servers:
            return Finding(claim, problem='no action server')
        if claim.named:
            if claim.node in servers:
                return Finding(claim, claim.node, 'action server')
            return Finding(claim, problem=f'served by {_names(servers)}, not by {claim.node}')
        return Finding(claim, servers[0], 'action server')
    if not subscribers and other_types:
        return Finding(
            claim,
            problem=f'subscribed only with another type than {claim.message_type}: '
            f'{_names(other_types)}',
        )
    if not subscribers:
        return Finding(claim, problem='nobody subscribes')
    if claim.node and claim.node in subscribers:
        return Finding(claim, claim.node, 'node name')
    if claim.state_topic:
        for node in subscribers:
            if node in state_publishers:
                return Finding(claim, node, f'publishes {claim.state_topic}')
    if not claim.node and not claim.state_topic:
        return Finding(claim, subscribers[0], ANY_SUBSCRIBER)
    wanted = ' or '.join(
        part
        for part in (claim.node, claim.state_topic and f'a publisher of {claim.state_topic}')
        if part
    )
    return Finding(claim, problem=f'subscribed by {_names(subscribers)}, none of them {wanted}')


def _names(nodes: Sequence[str]) -> str:
    return ', '.join(sorted(set(nodes)))
