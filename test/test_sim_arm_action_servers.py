# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The node's action outputs against the simulated robot's action servers, over DDS.

``dreamzero-sim-arm`` serves the AgiBot layout with every arm, the head and the waist as a
FollowJointTrajectory server and both effectors as GripperCommand servers; a client process
drives them through the policy node's own outputs (ros/group_outputs.py: follow_joint_trajectory
goals and GripperCommand goals) while recording the joint states. Goals of every server run at
once (both grippers moving together used to stop the simulated robot's joint states for good:
each goal held one of its two executor threads). control_msgs has no wheel: the stand-in of
test/interfaces is built and both processes import it.
"""

import json
import subprocess
import sys

from closed_loop import start_sim
from interface_support import control_msgs_env
from machine_load import load_factor
from node_support import ros_env
import pytest
import yaml

from dreamzero_ros.engine.embodiment import EMBODIMENTS_DIR

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

CLIENT = r"""
import json, sys, threading, time
import numpy as np
import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.lifecycle import LifecycleNode
from sensor_msgs.msg import JointState
from dreamzero_ros.core.robot.action_groups import ActionGroup, GroupLayout, load_groups
from dreamzero_ros.engine.embodiment import EMBODIMENTS_DIR
from dreamzero_ros.ros.controller_monitor import find_controllers, resolved_claims
from dreamzero_ros.ros.conversions import ROS_MESSAGES
from dreamzero_ros.ros.group_outputs import GroupOutputs

rclpy.init()
specs = load_groups(sys.argv[1], EMBODIMENTS_DIR)
groups, column = [], 0
for spec in specs:
    width = len(spec.joints) or len(spec.axes) or 1
    groups.append(ActionGroup(spec, tuple(range(column, column + width)), ('c',) * width))
    column += width
layout = GroupLayout(tuple(groups), (), (), (), ('joint_states',))
node = LifecycleNode('action_outputs_client')  # as the policy node
arrivals, latest = [], {}

def state(msg):
    arrivals.append(time.monotonic())
    latest.update(zip(msg.name, msg.position))

node.create_subscription(JointState, 'joint_states', state, 10)
outputs = GroupOutputs(node, layout)
executor = MultiThreadedExecutor(4)
executor.add_node(node)
spinner = threading.Thread(target=executor.spin, daemon=True)
spinner.start()
claims = resolved_claims(node, specs)
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    findings = find_controllers(node, claims)
    if all(f.found for f in findings.values()) and arrivals:
        break
    time.sleep(0.1)

def rate(seconds):
    now = time.monotonic()
    return sum(1 for t in arrivals if t > now - seconds) / seconds

clients = [*outputs._handles.values(), *(o._handle for o, _ in outputs._grippers.values())]
for client in clients:  # each action client has matched its server (else nothing is sent)
    if hasattr(client, 'wait_for_server'):
        client.wait_for_server(timeout_sec=30)
time.sleep(1.5)  # a full second of joint states before the goals
report = {'found': {g: str(f) for g, f in findings.items()}, 'rate_before': rate(1.0)}
target = np.full(column, 0.3)
outputs.send_trajectory(lambda g: ROS_MESSAGES.trajectory(
    0, g.spec.joints, [1_000_000_000], g.rows(target[None]), g.rows(np.zeros((1, column)))))
grippers = [g for g in layout.groups if g.spec.output == 'gripper']
for group in grippers:  # both goals at once
    outputs._grippers[group.name][0].send(0.8)
time.sleep(3.0)
report['rate_during'] = rate(2.0)
time.sleep(2.0)
report['rate_after'] = rate(2.0)
report['positions'] = {name: latest.get(name) for s in specs for name in s.state_names}
report['goal_failures'] = outputs.goal_failures
print(json.dumps(report))
executor.shutdown()
spinner.join(10)
outputs.destroy()
node.destroy_node()
rclpy.try_shutdown()
"""


@pytest.fixture
def agibot_actions(tmp_path):
    """AgiBot's shipped groups with every trajectory group a FollowJointTrajectory server."""
    data = yaml.safe_load((EMBODIMENTS_DIR / 'agibot.yaml').read_text())['groups']
    for entry in data:
        if entry['output'] == 'joint_trajectory':
            entry['output'] = 'follow_joint_trajectory'
            entry['target'] = entry['target'].replace('joint_trajectory', 'follow_joint_trajectory')
    path = tmp_path / 'agibot_actions.yaml'
    path.write_text(yaml.safe_dump({'groups': data}))
    return path


def test_every_action_server_runs_goals_at_once_and_joint_states_keep_coming(
    tmp_path, agibot_actions
):
    env = {**ros_env(), **control_msgs_env(), 'PYTHONUNBUFFERED': '1'}
    params = (f'action_groups:={agibot_actions}', 'gripper.speed:=1.0')
    with start_sim(tmp_path, *params, env=control_msgs_env()) as arm:
        result = subprocess.run(
            [sys.executable, '-c', CLIENT, str(agibot_actions)],
            env=env, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    arm_log = arm.log()
    assert result.returncode == 0, result.stderr[-3000:] + arm_log[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    # every controller is a node named as ros2_control names it, serving its action
    assert report['found']['left_arm'] == 'left_arm: /left_arm_controller (action server)'
    assert report['found']['right_effector'] == (
        'right_effector: /right_gripper_controller (action server)'
    )
    assert report['found']['base'] == 'base: /sim_arm (publishes /odom)'
    # the simulated robot keeps publishing (100 Hz; a loaded machine delivers fewer; it went
    # to 0 for good once both gripper goals ran)
    least = 50.0 / load_factor()
    assert report['rate_before'] > least, report
    assert report['rate_during'] > least and report['rate_after'] > least, (report, arm_log[-3000:])
    positions = report['positions']
    for name in ('idx21_arm_l_joint1', 'idx67_arm_r_joint7', 'idx11_head_joint1'):
        assert positions[name] == pytest.approx(0.3, abs=1e-3), positions
    for name in ('left_effector_joint', 'right_effector_joint'):
        assert positions[name] == pytest.approx(0.8, abs=1e-3), positions
    assert report['goal_failures'] == {}
    assert 'Traceback' not in arm_log, arm_log[-3000:]
