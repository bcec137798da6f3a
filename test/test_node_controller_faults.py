# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A controller that dies after enable stops every group; enable knows its controllers.

Over DDS, in separate processes: the policy node on a tiny checkpoint of the real AgiBot or YAM
layout, the simulated robot split over two ``dreamzero-sim-arm`` processes (one of them serving
the group that dies, with its joint states), and this harness publishing the cameras and
recording every command topic, as a recorder would. A recorder alone on the command topics is
refused at enable; the simulated controllers (nodes named as ros2_control names them) are taken.
Then one controller process is killed: every group holds at once, the base gets a zero Twist,
a running task aborts naming the group, diagnostics show ERROR naming it, and commands resume
only through ``~/enable``, which refuses while the group is still gone.
"""

import signal
import time

from closed_loop import split_groups
from interface_support import control_msgs_env
from machine_load import load_factor
from node_support import NODE, is_hold
import pytest
import yaml

from dreamzero_ros.core.robot.action_groups import load_groups
from dreamzero_ros.engine.embodiment import EMBODIMENTS_DIR

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 120.0
STATE_TIMEOUT = 1.0
AGIBOT = (range(18), range(2), range(2))  # arm joints, grippers, base velocities


def _split_robot(closed_loop, tmp_path, tag, safety, apart, harness, node_groups=None):
    """The node on ``tag``'s layout; its simulated robot in two parts (``apart`` the second).

    Returns the loop and a function starting a part (``main`` or ``apart``) of the robot.
    """
    loop = closed_loop(harness)
    files = split_groups(tmp_path, tag, apart)
    parameters = {
        # the simulated robot shares a loaded machine: its joint states come late
        'controller_watch.state_timeout': STATE_TIMEOUT * load_factor(),
        'max_age': 1.0 * load_factor(),
        # the input refusal while the head is gone must not end the task first
        'task.input_timeout': 60.0,
        'engine.warmup': True,  # the default: warmed up on the groups' layout
    }
    loop.start_embodiment(tag, node_groups or tag, safety, **parameters)

    def start_sim(part):
        loop.start_sim(f'action_groups:={files[part]}', 'gripper.speed:=1.0', node=f'sim_{part}')

    return loop, start_sim


def _moving(harness, key, since):
    return [m for m in harness.messages(key, since) if not is_hold(m)]


def _first_hold(harness, key, since):
    for arrived, msg in harness.received.get(key, []):
        if arrived >= since and is_hold(msg):
            return arrived
    return None


def _error_status(harness, since, text):
    """The newest ERROR of the policy node after ``since`` saying ``text``, once disabled."""
    from diagnostic_msgs.msg import DiagnosticStatus

    for msg in reversed(harness.messages('diagnostics', since)):
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values}
            if (
                status.name.startswith('dreamzero_policy')
                and status.level == DiagnosticStatus.ERROR
                and text in status.message
                and values['enabled'] == 'false'
            ):
                return status
    return None


def test_agibot_head_killed_holds_every_group_aborts_the_task_and_needs_enable(
    tmp_path, monkeypatch, closed_loop
):
    from action_msgs.msg import GoalStatus
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import Twist
    from rclpy.action import ActionClient
    from trajectory_msgs.msg import JointTrajectory

    from dreamzero_ros.ros.task_server import RunTask

    for name, value in control_msgs_env().items():  # GripperCommand for the effectors
        monkeypatch.setenv(name, value)
    robot, start_sim = _split_robot(
        closed_loop, tmp_path, 'agibot', AGIBOT, {'head'}, 'agibot_fault_harness'
    )
    harness = robot.harness
    arms = [s for s in load_groups('agibot', EMBODIMENTS_DIR) if s.output == 'joint_trajectory']
    for spec in arms:  # a recorder on every command topic
        harness.record(spec.name, JointTrajectory, spec.target)
    harness.record('cmd_vel', Twist, 'cmd_vel')
    harness.record('diagnostics', DiagnosticArray, '/diagnostics')
    client = ActionClient(harness.node, RunTask, f'{NODE}/run_task')
    try:
        robot.wait_configured(TIMEOUT)
        # the recorder alone is no controller: refused, naming what it found for each group
        response = robot.enable_refused_naming('subscribed by /agibot_fault_harness', TIMEOUT)
        assert (
            'left_arm (joint_trajectory left_arm_controller/joint_trajectory): subscribed by '
            '/agibot_fault_harness, none of them /left_arm_controller or a publisher of '
            '/left_arm_controller/controller_state' in response.message
        ), response.message
        assert (
            'base (twist cmd_vel): subscribed by /agibot_fault_harness, none of them a '
            'publisher of /odom' in response.message
        ), response.message
        assert 'left_effector (gripper left_gripper_controller/gripper_cmd): no action server' in (
            response.message
        )
        start_sim('main')
        start_sim('apart')
        response = robot.wait_enabled(TIMEOUT)
        for found in (
            'left_arm: /left_arm_controller (node name)',
            'head: /head_controller (node name)',
            'left_effector: /left_gripper_controller (action server)',
            'base: /sim_main (publishes /odom)',
        ):
            assert found in response.message, response.message
        assert client.wait_for_server(timeout_sec=30)
        sent = client.send_goal_async(RunTask.Goal(instruction='tidy the table'))
        handle = harness.wait_for(lambda: sent.done() and sent.result(), 30, 'the goal', robot.log)
        assert handle.accepted
        ended = handle.get_result_async()
        for spec in arms:
            harness.wait_for(
                lambda spec=spec: _moving(harness, spec.name, 0.0),
                TIMEOUT,
                f'a trajectory for {spec.name}',
                robot.log,
            )
        harness.wait_for(
            lambda: [t for t in harness.messages('cmd_vel') if t.linear.x or t.angular.z],
            TIMEOUT,
            'a base velocity',
            robot.log,
        )

        killed = harness.now()
        # SIGKILL: the head's controller and its joint states die
        robot.sims['sim_apart'].send_signal(signal.SIGKILL)
        result = harness.wait_for(
            lambda: ended.done() and ended.result(),
            30,
            'the task to end',
            robot.log,
        )
        assert result.status == GoalStatus.STATUS_ABORTED, result
        assert result.result.outcome == 'fault'
        assert 'controller fault (head: no joint states' in result.result.message, result
        others = [s.name for s in arms if s.name != 'head']
        holds = {
            name: harness.wait_for(
                lambda name=name: _first_hold(harness, name, killed),
                10,
                f'a hold for {name}',
                robot.log,
            )
            for name in others
        }
        # every group holds in the same control step (the holds leave together)
        assert max(holds.values()) - min(holds.values()) < 0.5, holds
        stopped = min(holds.values())
        assert harness.wait_for(
            lambda: [
                t for t in harness.messages('cmd_vel', killed) if not (t.linear.x or t.angular.z)
            ],
            10,
            'a zero Twist',
            robot.log,
        )
        status = harness.wait_for(
            lambda: _error_status(harness, killed, 'controller fault: head: no joint states'),
            10,
            'an ERROR naming the head',
            robot.log,
        )
        assert 'commands disabled until ~/enable' in status.message
        values = {kv.key: kv.value for kv in status.values}
        assert values['controller_fault'].startswith('head: no joint states'), values
        time.sleep(2.0)
        late = stopped + 0.3  # what was on its way when the hold left
        for name in others:
            assert _moving(harness, name, late) == [], name
        assert not [t for t in harness.messages('cmd_vel', late) if t.linear.x or t.angular.z]
        # enable is refused while the head's joint states are gone (its dead node may linger
        # in the graph until DDS's lease ends)
        response = robot.enable()
        assert not response.success and 'head: ' in response.message, response.message
        assert _moving(harness, 'left_arm', late) == []
        # the head comes back: commanding resumes only through enable
        start_sim('apart')
        harness.wait_for(lambda: robot.enable().success, TIMEOUT, 'enable again', robot.log)
        resumed = harness.now()
        client.send_goal_async(RunTask.Goal(instruction='tidy the table again'))
        harness.wait_for(
            lambda: _moving(harness, 'left_arm', resumed), TIMEOUT, 'commands again', robot.log
        )
        assert 'controller fault: head: no joint states' in robot.node.log()
    finally:
        client.destroy()
    assert robot.close() == 0, robot.log()


def test_yam_right_arm_controller_gone_with_a_recorder_left_on_its_topic_holds_everything(
    tmp_path, monkeypatch, closed_loop
):
    from diagnostic_msgs.msg import DiagnosticArray
    from trajectory_msgs.msg import JointTrajectory

    for name, value in control_msgs_env().items():  # GripperCommand for the grippers
        monkeypatch.setenv(name, value)
    robot, start_sim = _split_robot(
        closed_loop,
        tmp_path,
        'yam',
        (range(12), range(2), ()),
        {'right_arm', 'right_gripper'},
        'yam_fault_harness',
    )
    harness = robot.harness
    for side in ('left', 'right'):  # the recorder stays on the right arm's topic
        harness.record(side, JointTrajectory, f'{side}_arm_controller/joint_trajectory')
    harness.record('diagnostics', DiagnosticArray, '/diagnostics')
    start_sim('main')
    start_sim('apart')
    response = robot.wait_enabled(TIMEOUT)
    assert 'right_gripper: /right_gripper_controller (action server)' in response.message
    for side in ('left', 'right'):
        harness.wait_for(
            lambda side=side: _moving(harness, side, 0.0),
            TIMEOUT,
            f'a {side} trajectory',
            robot.log,
        )
    killed = harness.now()
    robot.sims['sim_apart'].send_signal(signal.SIGTERM)  # it leaves the graph at once
    hold = harness.wait_for(
        lambda: _first_hold(harness, 'left', killed), 10, 'a hold for the left arm', robot.log
    )
    status = harness.wait_for(
        lambda: _error_status(harness, killed, 'controller fault: right_arm: controller gone'),
        10,
        'an ERROR naming the right arm',
        robot.log,
    )
    assert (
        'subscribed by /yam_fault_harness, none of them /right_arm_controller' in status.message
    ), status.message
    time.sleep(2.0)
    assert _moving(harness, 'left', hold + 0.3) == []
    response = robot.enable()
    assert not response.success
    assert 'right_arm (joint_trajectory right_arm_controller/joint_trajectory): subscribed by ' in (
        response.message
    )
    assert 'right_gripper (gripper right_gripper_controller/gripper_cmd): no action server' in (
        response.message
    )
    assert robot.close() == 0, robot.log()


def test_agibot_nan_inf_or_absurd_odometry_is_refused_named_and_stops_commanding(
    tmp_path, monkeypatch, closed_loop
):
    """Bad measured base velocities never become a plan's start.

    The base's measured velocity comes from odometry the harness publishes; the simulated base,
    identified by its own odom, drives.
    """
    import math

    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import Twist
    from nav_msgs.msg import Odometry
    from trajectory_msgs.msg import JointTrajectory

    for name, value in control_msgs_env().items():  # GripperCommand for the effectors
        monkeypatch.setenv(name, value)
    data = yaml.safe_load((EMBODIMENTS_DIR / 'agibot.yaml').read_text())['groups']
    for entry in data:
        if entry['name'] == 'base':
            entry['odometry'] = 'measured_odom'
            entry['controller_state'] = 'odom'
    groups = tmp_path / 'groups.yaml'
    groups.write_text(yaml.safe_dump({'groups': data}))
    robot, start_sim = _split_robot(
        closed_loop, tmp_path, 'agibot', AGIBOT, {'head'}, 'odom_harness', groups
    )
    harness = robot.harness
    harness.record('left_arm', JointTrajectory, 'left_arm_controller/joint_trajectory')
    harness.record('cmd_vel', Twist, 'cmd_vel')
    harness.record('diagnostics', DiagnosticArray, '/diagnostics')
    speed = {'value': 0.0}
    odometry = harness.node.create_publisher(Odometry, 'measured_odom', 10)

    def publish_odometry():
        msg = Odometry()
        msg.twist.twist.linear.x = speed['value']
        odometry.publish(msg)

    timer = harness.node.create_timer(0.05, publish_odometry)
    start_sim('main')
    start_sim('apart')
    harness.wait_for(lambda: robot.enable().success, TIMEOUT, 'enable', robot.log)
    harness.wait_for(lambda: _moving(harness, 'left_arm', 0.0), TIMEOUT, 'a trajectory', robot.log)
    bad = harness.now()
    speed['value'] = math.nan
    status = harness.wait_for(
        lambda: _error_status(harness, bad, 'controller fault: base: state refused'),
        30,
        'an ERROR naming the base',
        robot.log,
    )
    values = {kv.key: kv.value for kv in status.values}
    assert values['last_state_refusal'] == 'base: linear.x is nan', values
    assert int(values['states_refused']) >= 1
    hold = _first_hold(harness, 'left_arm', bad)
    assert hold is not None and harness.wait_for(
        lambda: [t for t in harness.messages('cmd_vel', bad) if not t.linear.x],
        10,
        'a zero Twist',
        robot.log,
    )
    time.sleep(1.0)
    assert _moving(harness, 'left_arm', hold + 0.3) == []
    for value, problem in (
        (math.nan, 'base: linear.x is nan'),
        (math.inf, 'base: linear.x is inf'),
        (1e308, 'base: linear.x is 1e+308, beyond [-0.6, 0.6]'),
    ):
        speed['value'] = value
        time.sleep(0.5)
        response = robot.enable()
        assert not response.success and f'bad state: {problem}' in response.message, (
            value,
            response.message,
        )
    speed['value'] = 0.0
    harness.wait_for(lambda: robot.enable().success, TIMEOUT, 'enable again', robot.log)
    log = robot.node.log()
    assert 'odometry of base refused: linear.x is nan' in log
    assert 'no valid previous command' not in log, log[-3000:]
    harness.node.destroy_timer(timer)
    assert robot.close() == 0, robot.log()
