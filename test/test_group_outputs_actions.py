# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""follow_joint_trajectory outputs against real FollowJointTrajectory action servers, over DDS.

A server that rejects goals and one that aborts them (as JTC does on a path tolerance) make the
node's outputs log and count a failure per goal; a goal canceled because the next one preempted
it (JTC's answer to every new goal) is no failure. control_msgs has no wheel: the stand-in of
test/interfaces is built and the check runs in a process that imports it.
"""

import json
import subprocess
import sys

from interface_support import control_msgs_env
from node_support import ros_env
import pytest

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

SCRIPT = r"""
import json, threading, time
import numpy as np
import rclpy
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation
from rclpy.node import Node
from control_msgs.action import FollowJointTrajectory as FJT
from dreamzero_ros.core.robot.action_groups import ActionGroup, GroupLayout, groups_from_mapping
from dreamzero_ros.ros.conversions import ROS_MESSAGES
from dreamzero_ros.ros.controller_monitor import find_controllers, resolved_claims
from dreamzero_ros.ros.group_outputs import GroupOutputs

rclpy.init()
names = ('reject', 'abort', 'preempt')
specs = groups_from_mapping([
    {'name': n, 'output': 'follow_joint_trajectory', 'target': f'{n}/follow_joint_trajectory',
     'joints': [f'{n}_j1', f'{n}_j2']} for n in names])
layout = GroupLayout(
    groups=tuple(ActionGroup(s, (2 * i, 2 * i + 1), ('a[0]', 'a[1]')) for i, s in enumerate(specs)),
    arm_joints=tuple(j for s in specs for j in s.joints), grippers=(), velocity_names=(),
    state_topics=('joint_states',))
server, client = Node('fjt_servers'), Node('fjt_client')
group = ReentrantCallbackGroup()
newest = {}

def execute(name, handle):
    result = FJT.Result()
    if name == 'abort':
        result.error_code, result.error_string = result.PATH_TOLERANCE_VIOLATED, 'j1 off path'
        handle.abort()
        return result
    newest[name] = handle
    while newest[name] is handle:  # until the next goal preempts it, as JTC
        time.sleep(0.01)
    handle._update_state(rclpy_implementation.GoalEvent.CANCEL_GOAL)
    result.error_code = result.INVALID_GOAL
    result.error_string = 'Current goal cancelled due to new incoming action.'
    handle.canceled()
    return result

for n in names:
    ActionServer(server, FJT, f'{n}/follow_joint_trajectory',
                 lambda handle, n=n: execute(n, handle),
                 goal_callback=lambda request, n=n: GoalResponse.REJECT if n == 'reject'
                 else GoalResponse.ACCEPT,
                 cancel_callback=lambda goal: CancelResponse.ACCEPT, callback_group=group)
outputs = GroupOutputs(client, layout)
executor = MultiThreadedExecutor(4)
executor.add_node(server)
executor.add_node(client)
threading.Thread(target=executor.spin, daemon=True).start()
deadline = time.monotonic() + 60
claims = resolved_claims(client, specs)

def missing():
    return [g for g, f in find_controllers(client, claims).items() if not f.found]

while missing() and time.monotonic() < deadline:
    time.sleep(0.05)
rows = np.zeros((2, 6))
for _ in range(3):
    outputs.send_trajectory(lambda g: ROS_MESSAGES.trajectory(
        0, g.spec.joints, [0, 500_000_000], g.rows(rows), g.rows(rows)))
    outputs.wait_for_delivery(5.0)
    answered = {n: outputs._goals[n].done() for n in names}
    time.sleep(0.5)
newest['preempt'] = None  # the last goal ends too
time.sleep(1.0)
print(json.dumps({'failures': outputs.goal_failures, 'answered': answered,
                  'missing': missing()}))
"""


def test_rejected_and_aborted_goals_count_as_failures_preempted_ones_do_not(tmp_path):
    env = {**ros_env(), **control_msgs_env(), 'PYTHONUNBUFFERED': '1'}
    result = subprocess.run(
        [sys.executable, '-c', SCRIPT], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report['missing'] == []
    assert report['answered'] == {'reject': True, 'abort': True, 'preempt': True}
    assert report['failures'] == {'reject': 3, 'abort': 3}, result.stderr[-3000:]
    assert "action group 'reject': reject/follow_joint_trajectory: goal rejected" in result.stderr
    assert (
        "action group 'abort': abort/follow_joint_trajectory: goal aborted, error code -4: "
        'j1 off path' in result.stderr
    )
