# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The safety envelope over DDS: a policy drives the hand towards the table; it stops above it.

Four processes: a scripted OpenPI policy lowering the Panda's hand (test/envelope_policy_peer.py),
``dreamzero-sim-arm`` (the packaged Panda URDF, published on ``robot_description`` transient
local as robot_state_publisher does, and a table 0.3 m above the arm's base), the policy node
(``engine.backend: remote``, ``envelope.enabled``, its description read from the topic), and
this harness publishing the cameras. The node must cut every trajectory before the fingertips
reach the table; the arm must never have a link below it.
"""

from importlib import resources
import socket
import subprocess
import sys

from node_support import (
    CONFIG,
    REPO,
    Harness,
    NodeProcess,
    RobotStream,
    is_hold,
    latched_qos,
    node_diagnostics,
    ros_env,
)
import numpy as np
import pytest

from dreamzero_ros.core.envelope import EnvelopeConfig

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 120.0
TABLE = 0.3
ARM = [f'panda_joint{i}' for i in range(1, 8)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def _seconds(duration) -> float:
    return duration.sec + duration.nanosec * 1e-9


def _lowest_on(msg, points) -> float:
    """Lowest fingertip/flange height along the quintic the controller draws through ``msg``."""
    from dreamzero_ros.core.chunk_scheduler import ActionPlan

    assert list(msg.joint_names) == ARM
    times = np.array([_seconds(p.time_from_start) for p in msg.points])
    rows = np.array([p.positions for p in msg.points])
    velocities = np.array([p.velocities for p in msg.points])
    accelerations = np.array([p.accelerations for p in msg.points])
    assert accelerations.shape == rows.shape  # every point carries them: quintic segments
    if len(times) == 1:
        return float(points.positions(rows)[..., 2].min())
    plan = ActionPlan(times, rows, velocities, accelerations)
    dense = plan.positions_at(np.linspace(times[0], times[-1], 400))
    return float(points.positions(dense)[..., 2].min())


def _sim_arm_values(harness, since=0.0):
    for msg in reversed(harness.messages('diagnostics', since)):
        for status in msg.status:
            if status.name.startswith('sim_arm'):
                return {kv.key: kv.value for kv in status.values}
    return None


def test_a_trajectory_towards_the_table_is_cut_into_a_hold_above_it(tmp_path):
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory

    from dreamzero_ros.core.envelope import EnvelopeConfig
    from dreamzero_ros.core.kinematics import LinkPoints
    from dreamzero_ros.droid_clips import demo_clips

    urdf = (resources.files('dreamzero_ros') / 'descriptions' / 'panda.urdf').read_text()
    default = EnvelopeConfig()
    points = LinkPoints(urdf, ARM, default.links, default.offsets, default.frame)
    env = {**ros_env(), 'PYTHONUNBUFFERED': '1'}
    port = _free_port()
    logs = {name: open(tmp_path / f'{name}.log', 'w') for name in ('policy', 'arm')}  # noqa: SIM115
    policy = subprocess.Popen(
        [sys.executable, str(REPO / 'test' / 'envelope_policy_peer.py'), str(port)],
        cwd=REPO, env=env, stdout=logs['policy'], stderr=subprocess.STDOUT,
    )  # fmt: skip
    arm = subprocess.Popen(
        [sys.executable, '-m', 'dreamzero_ros.ros.sim_arm', '--ros-args',
         '-p', 'gripper.interface:=none', '-p', f'table.height:={TABLE}'],
        env=env, stdout=logs['arm'], stderr=subprocess.STDOUT,
    )  # fmt: skip
    harness = Harness('envelope_harness')
    harness.record('trajectory', JointTrajectory, 'joint_trajectory_controller/joint_trajectory')
    harness.record('diagnostics', DiagnosticArray, '/diagnostics')
    harness.record('states', JointState, 'joint_states')
    stream = RobotStream(harness, demo_clips(30)[0])
    stream.joints_on = False  # the simulated arm publishes them
    node = None

    def log() -> str:
        node_log = node.log() if node is not None else '(node not started)'
        return node_log + '\n--- sim arm:\n' + (tmp_path / 'arm.log').read_text()

    try:
        harness.wait_for(lambda: _sim_arm_values(harness), 30, 'the simulated arm', log)
        node = NodeProcess(
            tmp_path / 'node.log',
            'engine.backend:=remote',
            f'engine.remote_uri:=ws://127.0.0.1:{port}',
            'engine.warmup:=false',
            'scheduler.step_duration:=0.0',
            'scheduler.min_replan_period:=2.0',
            'gripper_joint_name:=panda_finger_joint1',
            'gripper_range:=[0.04, 0.0]',
            'envelope.enabled:=true',
            f'envelope.table_height:={TABLE}',
            'robot_description.source:=topic',
            'robot_description.timeout:=30.0',
            params_file=CONFIG / 'cpu_small.yaml',
        )
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
        assert _seconds(first.points[-1].time_from_start) < 1.6  # cut before the chunk's end
        # the arm followed, came close to the table and never had a link below it
        since = harness.now()
        arm_values = harness.wait_for(
            lambda: _sim_arm_values(harness, since), 10, 'a sim arm report', log
        )
        assert arm_values['below_table'] == '0', arm_values
        assert arm_values['trajectories_rejected'] == '0', arm_values
        measured = np.array([msg.position[:7] for msg in harness.messages('states')])
        fingertips = points.positions(measured)[..., 2].min()
        assert TABLE < fingertips < 0.4, fingertips  # from 0.487 m at the ready pose
    finally:
        stream.close()
        if node is not None:
            node.stop()
        for process in (arm, policy):
            process.terminate()
            process.wait(10)
        for handle in logs.values():
            handle.close()
        harness.close()


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
def test_a_bad_or_missing_description_fails_configure(tmp_path, description, message):
    from std_msgs.msg import String

    urdf = (resources.files('dreamzero_ros') / 'descriptions' / 'panda.urdf').read_text()
    harness = Harness('description_peer')
    if description is not None:
        publisher = harness.node.create_publisher(String, 'robot_description', latched_qos())
        publisher.publish(String(data=description(urdf)))
    node = NodeProcess(
        tmp_path / 'node.log',
        'engine.checkpoint:=/nonexistent',
        'engine.warmup:=false',
        'envelope.enabled:=true',
        # a latched description arrives once discovery is done (seconds on a loaded machine)
        'robot_description.source:=topic',
        f'robot_description.timeout:={2.0 if description is None else 30.0}',
        params_file=CONFIG / 'cpu_small.yaml',
    )
    try:
        assert node.wait_exit(60) != 0, node.log()
        assert message in node.log(), node.log()
        assert 'loading DreamZero' not in node.log()  # refused before the engine is touched
    finally:
        node.stop()
        harness.close()


@pytest.mark.parametrize(('table', 'below'), [(0.4, False), (0.55, True)])
def test_the_simulated_arm_checks_the_points_the_envelope_checks(tmp_path, table, below):
    """Its table sees the flange and the fingertips, as the node's envelope (not the shoulder)."""
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

    log = open(tmp_path / 'arm.log', 'w')  # noqa: SIM115 - closed below
    # at the ready pose the shoulder (panda_link2) is 0.333 m up, the fingertips 0.487 m
    arm = subprocess.Popen(
        [sys.executable, '-m', 'dreamzero_ros.ros.sim_arm', '--ros-args',
         '-p', 'gripper.interface:=none', '-p', f'table.height:={table}'],
        env={**ros_env(), 'PYTHONUNBUFFERED': '1'}, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    harness = Harness('table_harness')
    harness.record('diagnostics', DiagnosticArray, '/diagnostics')

    def report():  # a report after a few updates
        for msg in reversed(harness.messages('diagnostics')):
            for status in msg.status:
                values = {kv.key: kv.value for kv in status.values}
                if status.name.startswith('sim_arm') and values['lowest_link']:
                    return status, values
        return None

    try:
        status, values = harness.wait_for(report, 30, 'a report of the table', lambda: '')
        assert values['lowest_link'] in EnvelopeConfig().links
        assert abs(float(values['lowest_z']) - 0.487) < 2e-3, values['lowest_z']
        assert (int(values['below_table']) > 0) is below, values
        if below:
            assert status.level == DiagnosticStatus.ERROR and 'below the table' in status.message
        else:
            assert status.level == DiagnosticStatus.OK, status.message
    finally:
        arm.terminate()
        arm.wait(10)
        log.close()
        harness.close()
