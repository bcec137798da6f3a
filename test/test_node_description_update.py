# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A robot description published while the node commands: applied at a hold, or refused.

A peer publishes the Panda's description as robot_state_publisher does; the node commands a
random policy from it. The test then publishes, on the same topic, a description whose limits
are 0.3 rad either side of the arm's pose: the node says (log and diagnostics) that it applied
it at a hold, and every trajectory of an observation after that hold stays inside the new
limits (the random policy leaves them otherwise). A description with a duplicate joint name,
which ROS's URDF parser refuses, is refused in the log and diagnostics, and no motion is
commanded after it.
"""

import re

from node_support import JOINTS, Harness, is_hold, node_diagnostics
import numpy as np
import pytest
from test_core_robot_description import LOWER, panda_urdf

from dreamzero_ros.core.observations.messages import stamp_seconds
from dreamzero_ros.core.robot.panda import PANDA_READY

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 120.0
POSE = np.array(PANDA_READY)
NARROW = 0.3


def narrow_urdf() -> str:
    """panda_urdf with every arm joint limited to POSE +- NARROW."""
    text = panda_urdf()
    for i, (low, pose) in enumerate(zip(LOWER, POSE, strict=True)):
        start = text.index(f'<joint name="panda_joint{i + 1}"')
        end = text.index('</joint>', start)
        joint = re.sub(r'lower="[^"]*"', f'lower="{pose - NARROW}"', text[start:end])
        joint = re.sub(r'upper="[^"]*"', f'upper="{pose + NARROW}"', joint)
        assert low < pose - NARROW
        text = text[:start] + joint + text[end:]
    return text


def duplicate_joint_urdf() -> str:
    """panda_urdf with a second joint named panda_joint4 (on a link of its own)."""
    joint4 = panda_urdf().split('<joint name="panda_joint4"')[1].split('</joint>')[0]
    again = f'<link name="l4b"/><joint name="panda_joint4"{joint4.replace("l4", "l4b")}</joint>'
    return panda_urdf(extra=again)


def test_a_description_published_while_commanding_is_applied_at_a_hold_or_refused(closed_loop):
    from diagnostic_msgs.msg import DiagnosticArray
    from std_msgs.msg import String
    from trajectory_msgs.msg import JointTrajectory

    from dreamzero_ros.droid_clips import demo_clips
    from dreamzero_ros.ros.robot_description import DESCRIPTION_QOS

    loop = closed_loop('description_update_harness')
    loop.publish_description(panda_urdf())
    harness = loop.harness
    harness.record('trajectories', JointTrajectory, 'joint_trajectory_controller/joint_trajectory')
    harness.record('diagnostics', DiagnosticArray, '/diagnostics')
    description = harness.node.create_publisher(String, '/robot_description', DESCRIPTION_QOS)
    node = loop.start_tiny_node(
        'robot_description.source:=topic', 'scheduler.min_replan_period:=0.5'
    )
    stream = loop.stream_cameras(demo_clips(30)[0], joint_states=True, joint_names=JOINTS)
    stream.joint_positions = lambda now: [*POSE, 0.04]  # the arm rests at its pose

    def motions(since: float = 0.0) -> list:
        return [
            msg
            for msg in harness.messages('trajectories')
            if not is_hold(msg) and stamp_seconds(msg.header.stamp) > since
        ]

    harness.wait_for(lambda: len(motions()) >= 2, TIMEOUT, '2 trajectories', node.log)
    description.publish(String(data=narrow_urdf()))

    def note(prefix: str) -> str | None:
        found = node_diagnostics(
            harness,
            0.0,
            lambda status, values: values.get('robot_description', '').startswith(prefix),
        )
        return None if found is None else found[1]['robot_description']

    applied = harness.wait_for(lambda: note('applied'), TIMEOUT, 'applied', node.log)
    at = float(re.match(r'applied at the hold at ([0-9.]+) s', applied).group(1))
    assert "'panda' from /robot_description" in applied
    assert f'applied at the hold at {at:.3f} s' in node.log()
    later = harness.wait_for(
        lambda: motions(at) if len(motions(at)) >= 3 else None,
        TIMEOUT,
        '3 trajectories after the hold',
        node.log,
    )
    points = np.array([p.positions[:7] for msg in later for p in msg.points])
    assert np.all(points >= POSE - NARROW - 1e-9), points.min(axis=0) - (POSE - NARROW)
    assert np.all(points <= POSE + NARROW + 1e-9), points.max(axis=0) - (POSE + NARROW)
    before = np.array([p.positions[:7] for msg in motions() for p in msg.points])
    outside = (before < POSE - NARROW) | (before > POSE + NARROW)
    assert outside.any(), 'the policy never left the narrow limits: the test shows nothing'

    description.publish(String(data=duplicate_joint_urdf()))
    refused = harness.wait_for(lambda: note('refused'), TIMEOUT, 'refused', node.log)
    assert "joint 'panda_joint4' is not unique" in refused
    refused_at = float(re.match(r'refused at ([0-9.]+) s', refused).group(1))
    log = node.log()
    assert 'robot description published on /robot_description refused: ' in log
    assert 'commands DISABLED by robot description refusal' in log
    count = len(harness.messages('trajectories'))
    applied_then = int(values_at(harness, lambda v: 'robot_description' in v)['chunks_applied'])
    harness.wait_for(  # the node goes on querying (previews) while disabled
        lambda: int(values_at(harness, lambda v: True)['chunks_applied']) >= applied_then + 2,
        TIMEOUT,
        '2 more chunks after the refusal',
        node.log,
    )
    sent = harness.messages('trajectories')[count:]
    assert not [m for m in sent if not is_hold(m)], 'motion commanded after the refusal'
    assert not motions(refused_at)


def values_at(harness: Harness, predicate) -> dict[str, str]:
    """The newest policy diagnostics values that pass ``predicate``."""
    found = node_diagnostics(harness, 0.0, lambda status, values: predicate(values))
    assert found is not None
    return found[1]
