# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What the policy node does when asked: prompt, e-stop, enable, reset, parameters, events.

:class:`NodeRequests` holds the policy node's answers to its topics (``~/prompt`` through
:class:`PromptTopic`, ``~/estop``), services (``~/enable``, ``~/reset``), parameter changes
(checked, then applied: ``prompt``, ``session_id``, ``dry_run``), and to what happens to it (a
clock jump, a robot description published after configure); with enabling and disabling the
commands and resetting the policy's session, which they share. A part of
:class:`~dreamzero_ros.ros.policy_node.PolicyNode`, on the state that class sets up.
"""

from __future__ import annotations

import time
from typing import Any

from rcl_interfaces.msg import SetParametersResult
from rclpy.clock import ClockChange, TimeJump
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Bool, String
from std_srvs.srv import SetBool, Trigger

from dreamzero_ros.core.config.node_config import PARAMETERS
from dreamzero_ros.core.control.task_runner import abbreviate, prompt_too_long
from dreamzero_ros.core.motion.chunk_scheduler import ActionPlan
from dreamzero_ros.core.robot.robot_description import RobotDescription
from dreamzero_ros.ros.plan_views import envelope_and_views
from dreamzero_ros.ros.ros_compat import SubscriptionEventCallbacks

#: A prompt equal to the last one, read by the other ~/prompt subscription within this many
#: seconds, is the same latched sample (delivered to both), not a new prompt.
DUPLICATE_PROMPT_WINDOW = 1.0
LATCHED = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
_SPECS = {spec.name: spec for spec in PARAMETERS}


def _volatile_prompt_writer(event: Any) -> None:
    """A volatile ~/prompt publisher: the volatile subscription reads it; nothing to say."""


class PromptTopic:
    """``~/prompt`` (std_msgs/String): each prompt published sets the ``prompt`` parameter once.

    ros2 topic pub publishes volatile, which a transient-local reader never matches; a latched
    prompt (transient local) is read by the second subscription. A volatile publisher is
    "incompatible" with that one only: rclpy's warning that no messages will be received would
    be false (the first one receives them), so it is not logged. A latched publisher reaches
    both: its message is used once.
    """

    def __init__(self, node: Node) -> None:
        self._node = node
        self._last: tuple[str, str, float] | None = None
        node.create_subscription(String, '~/prompt', lambda msg: self._on_prompt(msg, 'v'), 10)
        node.create_subscription(
            String,
            '~/prompt',
            lambda msg: self._on_prompt(msg, 'l'),
            LATCHED,
            event_callbacks=SubscriptionEventCallbacks(incompatible_qos=_volatile_prompt_writer),
        )

    def _on_prompt(self, msg: String, reader: str) -> None:
        """A prompt from reader ``v`` (volatile) or ``l`` (latched); one sample reaches both."""
        now = time.monotonic()
        last = self._last
        self._last = (msg.data, reader, now)
        if last is not None and last[0] == msg.data and last[1] != reader:
            if now - last[2] < DUPLICATE_PROMPT_WINDOW:
                return  # the same sample through the other subscription
        parameter = Parameter('prompt', Parameter.Type.STRING, msg.data)
        (result,) = self._node.set_parameters([parameter])
        if not result.successful:
            self._node.get_logger().warning(f'~/prompt refused: {result.reason}')


class NodeRequests:
    """The policy node's request handlers.

    A base of :class:`~dreamzero_ros.ros.policy_node.PolicyNode`: they read and set its state
    (the control loop, the outputs, the task server) and use its ``_now``, ``_publish_hold``
    and ``publish_diagnostics``.
    """

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
            # raises as the envelope would
            envelope_and_views(self, settings, description, arm_joints, views=False)
        except ValueError as error:
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
        self.robot_description = description
        self._outputs.replace_plan_views(None)
        self.loop.envelope, plan_views = envelope_and_views(self, settings, description, arm_joints)
        self._outputs.plan_views = plan_views
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

    def _set_enabled(self, enabled: bool, source: str) -> bool:
        """Enable or disable commands; False when enabling is refused (a controller missing)."""
        if enabled == self.enabled:
            return True
        refusal, found = '', ''
        if enabled and self._controllers is not None and not self.dry_run:
            refusal, found = self._controllers.enable_refusal(self.lifecycle_state == 'active')
            unmatched = self._outputs.controllers.unmatched()
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
        self._inference.reset(session_id)
        self.get_logger().warning(f'session {session_id!r} reset ({why})')
