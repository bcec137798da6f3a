# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Bimanual and mobile robots end to end over DDS: every action group to its own controller.

Three processes each: the policy node on a random tiny checkpoint of the real AgiBot or YAM
layout (keys, widths, relative keys of upstream's configs), ``dreamzero-sim-arm`` serving every
group of the same layout (a joint_trajectory_controller per arm, head and waist, a gripper per
effector, a base integrating Twist into odometry), and this harness publishing the cameras and
recording what each controller receives. The joint states come from the simulated robot only.
"""

import re
import time

from closed_loop import embodiment_parameters, params_file
from embodiment_support import write_shipped_checkpoint
from interface_support import control_msgs_env
from node_support import NODE, NodeProcess, diagnostic_count, is_hold, node_diagnostics
import numpy as np
import pytest
import yaml

from dreamzero_ros.core.robot.action_groups import load_groups
from dreamzero_ros.core.robot.kinematics import LinkPoints
from dreamzero_ros.core.robot.panda import PANDA_LOWER, PANDA_UPPER
from dreamzero_ros.engine.embodiment import EMBODIMENTS_DIR

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 120.0  # the CPU is shared with other test processes
AGIBOT = (range(18), range(2), range(2))  # arm joints, grippers, base velocities
YAM = (range(12), range(2), ())


def _robot(closed_loop, tag, groups, safety, **parameters):
    """The loop of one embodiment: its node, and (not yet) its simulated robot."""
    loop = closed_loop(f'{tag}_groups_harness')
    loop.start_embodiment(tag, groups, safety, **parameters)
    return loop


def _start_sim(loop, groups, *params):
    """The simulated robot of ``groups``; the node's enable succeeds once its controllers are up."""
    loop.start_sim(f'action_groups:={groups}', 'gripper.speed:=1.0', *params)
    loop.wait_enabled(TIMEOUT)


def _trajectories(harness, key):
    return [m for m in harness.messages(key) if not is_hold(m)]


def test_agibot_every_group_reaches_its_controller_and_a_hold_stops_them_all(
    closed_loop, monkeypatch
):
    from geometry_msgs.msg import Twist
    from nav_msgs.msg import Odometry
    from std_msgs.msg import Bool, String
    from trajectory_msgs.msg import JointTrajectory

    for name, value in control_msgs_env().items():  # GripperCommand for the effectors
        monkeypatch.setenv(name, value)
    robot = _robot(closed_loop, 'agibot', 'agibot', AGIBOT)
    harness = robot.harness
    jtc = [s for s in load_groups('agibot', EMBODIMENTS_DIR) if s.output == 'joint_trajectory']
    for spec in jtc:
        harness.record(spec.name, JointTrajectory, spec.target)
    harness.record('cmd_vel', Twist, 'cmd_vel')
    harness.record('odom', Odometry, 'odom')
    harness.record('rejected', String, '/sim_arm/rejected')
    robot.wait_configured(TIMEOUT)
    # no controllers yet (the harness only records the trajectory and cmd_vel topics, and a
    # recorder is no controller): enabling is refused, naming every group and what it found
    response = robot.enable_refused_naming('subscribed by /agibot_groups_harness', TIMEOUT)
    assert (
        'no controller for left_arm (joint_trajectory left_arm_controller/joint_trajectory): '
        'subscribed by /agibot_groups_harness, none of them /left_arm_controller'
    ) in response.message
    assert (
        'left_effector (gripper left_gripper_controller/gripper_cmd): no action server'
    ) in response.message
    assert 'right_effector' in response.message and 'base (twist cmd_vel)' in response.message
    _start_sim(robot, 'agibot')
    assert 'controllers: left_arm: /left_arm_controller (node name)' in robot.enable().message
    for spec in jtc:
        plans = harness.wait_for(
            lambda spec=spec: _trajectories(harness, spec.name),
            TIMEOUT,
            f'a trajectory for {spec.name}',
            robot.log,
        )
        assert list(plans[0].joint_names) == list(spec.joints)
        positions = np.array([p.positions for p in plans[0].points])
        assert positions.shape[1] == len(spec.joints) and np.all(np.abs(positions) <= 3.0)
    moving = harness.wait_for(
        lambda: [t for t in harness.messages('cmd_vel') if t.linear.x or t.angular.z],
        TIMEOUT,
        'a base velocity',
        robot.log,
    )
    assert all(abs(t.linear.x) <= 0.2 + 1e-9 and abs(t.angular.z) <= 0.2 + 1e-9 for t in moving)
    assert harness.wait_for(
        lambda: [o for o in harness.messages('odom') if o.pose.pose.orientation.z != 0],
        TIMEOUT,
        'the base to turn',
        robot.log,
    )
    harness.wait_for(
        lambda: all(f'gripper goal ({s}' in robot.log() for s in ('left_eff', 'right_eff')),
        TIMEOUT,
        'a goal for each effector',
        robot.log,
    )
    # the e-stop holds every group together: each arm, head and waist gets a hold, the base
    # a zero Twist, and nothing moves after it
    publisher = harness.node.create_publisher(Bool, f'{NODE}/estop', 10)
    stopped = harness.now()
    harness.wait_for(
        lambda: (
            publisher.publish(Bool(data=True))
            or all(any(is_hold(m) for m in harness.messages(s.name, stopped)) for s in jtc)
        ),
        30,
        'a hold on every trajectory controller',
        robot.log,
    )
    harness.wait_for(
        lambda: [
            t for t in harness.messages('cmd_vel', stopped) if not (t.linear.x or t.angular.z)
        ],
        30,
        'a zero Twist for the base',
        robot.log,
    )
    settled = harness.now() + 0.5
    time.sleep(1.5)
    assert not [t for t in harness.messages('cmd_vel', settled) if t.linear.x or t.angular.z]
    for spec in jtc:
        assert all(is_hold(m) for m in harness.messages(spec.name, settled))
    assert harness.messages('rejected') == [], robot.log()
    assert 'bad_joints' not in robot.node.log()
    assert robot.close() == 0, robot.log()


@pytest.fixture
def yam_groups(tmp_path):
    """YAM's shipped groups with each arm's joint states on its own topic, float64 grippers."""
    data = yaml.safe_load((EMBODIMENTS_DIR / 'yam.yaml').read_text())['groups']
    for entry in data:
        side = entry['name'].split('_')[0]
        entry['state_topic'] = f'{side}_arm/joint_states'
        if entry['output'] == 'gripper':
            entry['interface'] = 'float64'
            entry['target'] = f'{side}_gripper/command'
    path = tmp_path / 'yam_groups.yaml'
    path.write_text(yaml.safe_dump({'groups': data}))
    return path


def test_yam_two_arms_two_grippers_joint_states_from_two_topics(closed_loop, yam_groups):
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64, String
    from trajectory_msgs.msg import JointTrajectory

    robot = _robot(closed_loop, 'yam', yam_groups, YAM)
    harness = robot.harness
    for side in ('left', 'right'):
        harness.record(f'{side}_arm', JointTrajectory, f'{side}_arm_controller/joint_trajectory')
        harness.record(f'{side}_states', JointState, f'{side}_arm/joint_states')
    harness.record('left_gripper', Float64, 'left_gripper/command')
    harness.record('rejected', String, '/sim_arm/rejected')
    robot.wait_configured(TIMEOUT)
    # nothing subscribes to the right gripper's topic yet, and the harness on the others is
    # no controller: enabling is refused, naming them
    response = robot.enable_refused_naming('subscribed by /yam_groups_harness', TIMEOUT)
    assert response.message.endswith(
        'right_gripper (gripper right_gripper/command): nobody subscribes'
    ), response.message
    assert (
        'left_gripper (gripper left_gripper/command): subscribed by /yam_groups_harness, none '
        'of them /left_gripper'
    ) in response.message
    harness.record('right_gripper', Float64, 'right_gripper/command')
    _start_sim(robot, yam_groups)
    for side in ('left', 'right'):
        plans = harness.wait_for(
            lambda side=side: _trajectories(harness, f'{side}_arm'),
            TIMEOUT,
            f'a trajectory for the {side} arm',
            robot.log,
        )
        assert list(plans[0].joint_names) == [f'{side}_joint{i}' for i in range(1, 7)]
        assert harness.wait_for(
            lambda side=side: harness.messages(f'{side}_gripper'),
            TIMEOUT,
            f'the {side} gripper command',
            robot.log,
        )
        states = harness.wait_for(
            lambda side=side: harness.messages(f'{side}_states'),
            TIMEOUT,
            f'the {side} joint states',
            robot.log,
        )
        assert list(states[-1].name) == [
            *(f'{side}_joint{i}' for i in range(1, 7)),
            f'{side}_gripper',
        ]
    assert harness.messages('rejected') == [], robot.log()
    assert 'bad_joints' not in robot.node.log()
    # no joint states before the simulated robot started; then both topics together
    assert 'input usable again' in robot.node.log()
    assert robot.close() == 0, robot.log()


def test_a_mapping_leaving_a_column_unused_fails_configure_naming_it(tmp_path):
    data = yaml.safe_load((EMBODIMENTS_DIR / 'agibot.yaml').read_text())['groups']
    data = [g for g in data if g['name'] != 'base']  # a robot without a mobile base
    for entry in data:
        if entry['output'] == 'gripper':
            entry['interface'] = 'float64'
    groups = tmp_path / 'agibot_groups.yaml'
    groups.write_text(yaml.safe_dump({'groups': data}))
    checkpoint = write_shipped_checkpoint(tmp_path / 'agibot', 'agibot')
    parameters = embodiment_parameters(checkpoint, 'agibot', groups, AGIBOT)
    node = NodeProcess(tmp_path / 'node.log', params_file=params_file(tmp_path, **parameters))
    assert node.wait_exit(TIMEOUT) == 1
    log = node.log()
    assert 'action column 20 (robot_velocity[0]) is sent to no group' in log, log
    assert 'map it, to output none if the robot does not execute it' in log


def test_yam_arms_by_follow_joint_trajectory_goals_preempted_by_the_next_and_by_the_estop(
    tmp_path, monkeypatch, closed_loop
):
    """Each YAM arm through a FollowJointTrajectory action server, as JTC's action interface.

    Every chunk is a goal that preempts the one before (the server cancels it, which the node
    does not count as a failure); the e-stop's hold is a goal too, after which the arms stop.
    """
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Bool

    for name, value in control_msgs_env().items():  # FollowJointTrajectory, and for the sim
        monkeypatch.setenv(name, value)
    data = yaml.safe_load((EMBODIMENTS_DIR / 'yam.yaml').read_text())['groups']
    for entry in data:
        side = entry['name'].split('_')[0]
        if entry['output'] == 'joint_trajectory':
            entry['output'] = 'follow_joint_trajectory'
            entry['target'] = f'{side}_arm_controller/follow_joint_trajectory'
        else:
            entry['interface'] = 'float64'
            entry['target'] = f'{side}_gripper/command'
    groups = tmp_path / 'yam_fjt.yaml'
    groups.write_text(yaml.safe_dump({'groups': data}))
    robot = _robot(closed_loop, 'yam', groups, YAM)
    harness = robot.harness
    harness.record('states', JointState, 'joint_states')
    harness.record('diagnostics', DiagnosticArray, '/diagnostics')

    def accepted(side):
        return diagnostic_count(harness, f'{side}_arm.trajectories_accepted')

    robot.wait_configured(TIMEOUT)
    # no action servers yet: enabling is refused, naming both arms
    response = robot.enable()
    assert not response.success and 'left_arm (follow_joint_trajectory' in response.message
    _start_sim(robot, groups)
    for side in ('left', 'right'):
        harness.wait_for(
            lambda side=side: accepted(side) >= 3, TIMEOUT, f'3 {side} arm goals', robot.log
        )
    moved = harness.wait_for(
        lambda: [m for m in harness.messages('states') if np.any(np.abs(m.position) > 1e-4)],
        TIMEOUT,
        'the arms to move',
        robot.log,
    )
    assert set(moved[-1].name) >= {'left_joint1', 'right_joint6'}
    publisher = harness.node.create_publisher(Bool, f'{NODE}/estop', 10)
    before = accepted('left')
    harness.wait_for(
        lambda: publisher.publish(Bool(data=True)) or accepted('left') > before,
        30,
        'the e-stop hold as a goal',
        robot.log,
    )
    time.sleep(2.0)  # the hold brakes within stop_deceleration, then nothing moves
    settled = harness.now()
    time.sleep(1.0)
    late = harness.messages('states', settled)
    assert late and all(np.all(np.abs(m.velocity) < 1e-9) for m in late), late[-1]
    log = robot.node.log()
    assert "action group 'left_arm': " not in log, log[-3000:]  # no goal counted as failed
    assert "action group 'right_arm': " not in log, log[-3000:]
    assert 'Traceback' not in robot.log()
    assert robot.close() == 0, robot.log()


def test_yam_on_a_two_arm_description_the_envelope_covers_both_hands(
    tmp_path, yam_groups, closed_loop
):
    """envelope.* on a bimanual description: its links on both arms, over every arm joint.

    The table is set above both hands (the description: two Pandas whose first six joints carry
    YAM's names), so every chunk leaves the envelope from its start and is cut into a hold.
    """
    from description_support import bimanual_panda_urdf
    from diagnostic_msgs.msg import DiagnosticArray
    from trajectory_msgs.msg import JointTrajectory

    description = tmp_path / 'bimanual.urdf'
    description.write_text(bimanual_panda_urdf())
    ready = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571]
    robot = _robot(
        closed_loop,
        'yam',
        yam_groups,
        YAM,
        **{
            'robot_description.source': 'file',
            'robot_description.file': str(description),
            'envelope.enabled': True,
            'envelope.links': ['left_panda_link8', 'right_panda_link8'],
            'envelope.link_offsets': [0.0] * 6,
            'envelope.frame': 'world',
            'envelope.table_height': 1.0,
            # within the description's limits (a parameter may only tighten them)
            'safety.joint_lower': [*PANDA_LOWER[:6], *PANDA_LOWER[:6], 0.0, 0.0],
            'safety.joint_upper': [*PANDA_UPPER[:6], *PANDA_UPPER[:6], 1.0, 1.0],
            'safety.max_velocity': [2.0] * 12,
        },
    )
    harness = robot.harness
    for side in ('left', 'right'):
        harness.record(f'{side}_arm', JointTrajectory, f'{side}_arm_controller/joint_trajectory')
    harness.record('diagnostics', DiagnosticArray, '/diagnostics')
    robot.wait_configured(TIMEOUT)
    assert 'safety envelope on left_panda_link8, right_panda_link8 in world' in robot.node.log()
    _start_sim(robot, yam_groups, f'initial_positions:={ready * 2}')
    harness.wait_for(
        lambda: 'trajectory cut into a hold' in robot.node.log(),
        TIMEOUT,
        'a chunk cut by the envelope',
        robot.log,
    )
    _, values = harness.wait_for(
        lambda: node_diagnostics(harness, 0.0, lambda _, v: int(v['envelope_cuts']) > 0),
        TIMEOUT,
        'envelope cuts in diagnostics',
        robot.log,
    )
    assert re.search(r'(left|right)_panda_link8 .*table', values['last_envelope']), values
    # every trajectory sent brakes where it starts: neither hand goes down towards the table
    urdf = description.read_text()
    for side in ('left', 'right'):
        joints = [f'{side}_joint{i}' for i in range(1, 7)]
        hand = LinkPoints(urdf, joints, [f'{side}_panda_link8'], frame='world')
        start = hand.positions(np.array(ready))[0, 0, 2]
        sent = harness.messages(f'{side}_arm')
        assert sent, robot.log()
        for msg in sent:
            assert list(msg.joint_names) == joints
            heights = hand.positions(np.array([p.positions for p in msg.points]))[..., 2]
            assert heights.min() > start - 0.02, (side, heights.min(), start)
    assert robot.close() == 0, robot.log()
