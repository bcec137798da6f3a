# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The safety envelope over DDS: a policy drives the hand towards the table; it stops above it.

Four processes: a scripted OpenPI policy lowering the Panda's hand (test/policy_peer.py),
``dreamzero-sim-arm`` (the packaged Panda URDF, published on ``robot_description`` transient
local as robot_state_publisher does, and a table 0.3 m above the arm's base), the policy node
(``engine.backend: remote``, ``envelope.enabled``, its description read from the topic), and
this harness publishing the cameras. The node must cut every trajectory before the fingertips
reach the table; the arm must never have a link below it.
"""

from importlib import resources

from closed_loop import hand_toward_the_table
from node_support import is_hold, latched_qos, node_diagnostics
import numpy as np
import pytest

from dreamzero_ros.core.motion.envelope import EnvelopeConfig
from dreamzero_ros.core.observations.messages import stamp_seconds

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 120.0
TABLE = 0.3
ARM = [f'panda_joint{i}' for i in range(1, 8)]


def _lowest_on(msg, points) -> float:
    """Lowest fingertip/flange height along the quintic the controller draws through ``msg``."""
    from dreamzero_ros.core.motion.chunk_scheduler import ActionPlan

    assert list(msg.joint_names) == ARM
    times = np.array([stamp_seconds(p.time_from_start) for p in msg.points])
    rows = np.array([p.positions for p in msg.points])
    velocities = np.array([p.velocities for p in msg.points])
    accelerations = np.array([p.accelerations for p in msg.points])
    assert accelerations.shape == rows.shape  # every point carries them: quintic segments
    if len(times) == 1:
        return float(points.positions(rows)[..., 2].min())
    plan = ActionPlan(times, rows, velocities, accelerations)
    dense = plan.positions_at(np.linspace(times[0], times[-1], 400))
    return float(points.positions(dense)[..., 2].min())


def test_a_trajectory_towards_the_table_is_cut_into_a_hold_above_it(closed_loop):
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory

    from dreamzero_ros.core.robot.kinematics import LinkPoints

    urdf = (resources.files('dreamzero_ros') / 'descriptions' / 'panda.urdf').read_text()
    default = EnvelopeConfig()
    points = LinkPoints(urdf, ARM, default.links, default.offsets, default.frame)
    loop = closed_loop('envelope_harness')
    harness, log = loop.harness, loop.log
    harness.record('trajectory', JointTrajectory, 'joint_trajectory_controller/joint_trajectory')
    harness.record('diagnostics', DiagnosticArray, '/diagnostics')
    harness.record('states', JointState, 'joint_states')
    overrides = hand_toward_the_table(loop, TABLE)
    harness.wait_for(
        lambda: node_diagnostics(harness, name='sim_arm'), 30, 'the simulated arm', log
    )
    node = loop.start_node(*overrides)
    cut = harness.wait_for(
        lambda: node_diagnostics(
            harness, 0.0, lambda status, values: int(values.get('envelope_cuts', 0)) >= 2
        ),
        TIMEOUT,
        'two trajectories cut at the envelope',
        log,
    )
    values = cut[1]
    assert 'table' in values['last_envelope'] and 'chunk' in values['last_envelope']
    assert values['last_envelope'].split(':')[1].split()[0] in default.links
    assert 'safety envelope on panda_link8' in node.log()
    motions = [m for m in harness.messages('trajectory') if not is_hold(m)]
    assert motions, log()
    # nothing published goes below the table, anywhere along the interpolated curve
    lowest = [_lowest_on(msg, points) for msg in motions]
    assert min(lowest) > TABLE, lowest
    # the first plan went down towards the table, then braked to rest above it
    first = motions[0]
    assert lowest[0] < 0.42, lowest
    np.testing.assert_allclose(first.points[-1].velocities, 0.0, atol=1e-9)
    assert stamp_seconds(first.points[-1].time_from_start) < 1.6  # cut before the chunk's end
    # the arm followed, came close to the table and never had a link below it
    since = harness.now()
    _, arm_values = harness.wait_for(
        lambda: node_diagnostics(harness, since, name='sim_arm'), 10, 'a sim arm report', log
    )
    assert arm_values['below_table'] == '0', arm_values
    assert arm_values['trajectories_rejected'] == '0', arm_values
    measured = np.array([msg.position[:7] for msg in harness.messages('states')])
    fingertips = points.positions(measured)[..., 2].min()
    assert TABLE < fingertips < 0.4, fingertips  # from 0.487 m at the ready pose


@pytest.mark.parametrize(
    ('description', 'message'),
    [
        (
            lambda urdf: urdf.replace('"panda_joint7"', '"wrist_roll"'),
            "has no joint 'panda_joint7'",
        ),
        (lambda urdf: urdf[: len(urdf) // 2], 'robot description does not parse'),
        (None, 'no robot description on /robot_description within 2.0 s'),
    ],
)
def test_a_bad_or_missing_description_fails_configure(closed_loop, description, message):
    from std_msgs.msg import String

    urdf = (resources.files('dreamzero_ros') / 'descriptions' / 'panda.urdf').read_text()
    loop = closed_loop('description_peer')
    if description is not None:
        publisher = loop.harness.node.create_publisher(String, 'robot_description', latched_qos())
        publisher.publish(String(data=description(urdf)))
    node = loop.start_node(
        'engine.checkpoint:=/nonexistent',
        'engine.warmup:=false',
        'envelope.enabled:=true',
        # a latched description arrives once discovery is done (seconds on a loaded machine)
        'robot_description.source:=topic',
        f'robot_description.timeout:={2.0 if description is None else 30.0}',
    )
    assert node.wait_exit(60) != 0, node.log()
    assert message in node.log(), node.log()
    assert 'loading DreamZero' not in node.log()  # refused before the engine is touched


@pytest.mark.parametrize(('table', 'below'), [(0.4, False), (0.55, True)])
def test_the_simulated_arm_checks_the_points_the_envelope_checks(closed_loop, table, below):
    """Its table sees the flange and the fingertips, as the node's envelope (not the shoulder)."""
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

    loop = closed_loop('table_harness')
    # at the ready pose the shoulder (panda_link2) is 0.333 m up, the fingertips 0.487 m
    loop.start_sim('gripper.interface:=none', f'table.height:={table}')
    harness = loop.harness
    harness.record('diagnostics', DiagnosticArray, '/diagnostics')
    status, values = harness.wait_for(  # a report after a few updates
        lambda: node_diagnostics(harness, 0.0, lambda _, v: v['lowest_link'], name='sim_arm'),
        30,
        'a report of the table',
        lambda: '',
    )
    assert values['lowest_link'] in EnvelopeConfig().links
    assert abs(float(values['lowest_z']) - 0.487) < 2e-3, values['lowest_z']
    assert (int(values['below_table']) > 0) is below, values
    if below:
        assert status.level == DiagnosticStatus.ERROR and 'below the table' in status.message
    else:
        assert status.level == DiagnosticStatus.OK, status.message
