# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The policy node on faulty inputs, in its own process, on the tiny engine, over DDS.

The harness publishes ``/clock`` (the node runs on simulated time, so that the clock can jump),
the real DROID clips at 15 Hz and the joint states of an arm whose joint 4 stands outside its
configured limits; it records the node's preview trajectories and diagnostics. One node serves
the module; the tests run in file order and each leaves the inputs streaming normally.
"""

from closed_loop import ClosedLoop
from diagnostic_msgs.msg import DiagnosticArray
from node_support import (
    ARM,
    CAMERA_QOS,
    JOINTS,
    NODE,
    is_hold,
    loaded_input_tolerances,
    node_diagnostics,
)
import numpy as np
import pytest
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState
from trajectory_msgs.msg import JointTrajectory

from dreamzero_ros.core.observations.messages import stamp_seconds, to_ns
from dreamzero_ros.core.robot.panda import PANDA_LOWER, PANDA_UPPER
from dreamzero_ros.ros.conversions import ROS_MESSAGES, to_time

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 60.0  # generous: the CPU is shared with other test processes
MAX_DELTA = 0.1  # safety.max_step_delta of the arm joints (default)
#: A Franka pose with joint 4 at +0.40 rad, above its upper limit -0.0698 rad.
POSE = [0.0, -0.3, 0.0, 0.40, 0.0, 1.9, 0.8, 0.02]  # finger half open


@pytest.fixture(scope='module')
def clips():
    from dreamzero_ros.droid_clips import demo_clips

    return demo_clips(30)[0]


@pytest.fixture(scope='module')
def system(tmp_path_factory, clips):
    folder = tmp_path_factory.mktemp('input_faults')
    with ClosedLoop(folder, 'input_faults_harness', use_sim_time=True) as loop:
        harness = loop.harness
        clock = loop.start_clock()
        harness.record('preview', JointTrajectory, f'{NODE}/preview_trajectory')
        harness.record('diagnostics', DiagnosticArray, '/diagnostics')
        stream = loop.stream_cameras(clips, joint_states=True)
        stream.joint_positions = lambda now: POSE
        node = loop.start_tiny_node(
            'dry_run:=true',
            'use_sim_time:=true',
            *loaded_input_tolerances(),  # a loaded machine delivers the 15 Hz frames late
        )
        yield harness, stream, clock, node
        assert loop.close() == 0, node.log()[-3000:]


def _trajectories(harness, node, count, since, timeout=TIMEOUT):
    """``count`` motion (non-hold) previews recorded after ``since``."""
    return harness.wait_motions('preview', count, since, timeout, node.log)


def _values(harness, node, since, predicate, what, timeout=15.0):
    return harness.wait_for(
        lambda: node_diagnostics(harness, since, lambda s, v: predicate(v)),
        timeout,
        what,
        node.log,
    )[1]


def test_joint_outside_its_limits_is_brought_in_at_max_step_delta_never_a_jump(system):
    harness, _, _, node = system
    first = _trajectories(harness, node, 1, 0.0, timeout=120.0)[0]
    assert list(first.joint_names) == ARM
    positions = np.array([p.positions for p in first.points])
    steps = np.abs(np.diff(np.vstack([POSE[:7], positions]), axis=0))
    assert np.all(steps[:, :7] <= MAX_DELTA + 1e-9), f'first steps {steps[:3, :7]}'
    # every target lies inside the limits (<= -0.0698): joint 4 walks there, 0.47 rad in at
    # least 5 steps, never further out on the way
    joint4 = positions[:, 3]
    inside_from = int(np.argmax(joint4 <= PANDA_UPPER[3] + 1e-9))
    assert joint4[inside_from] <= PANDA_UPPER[3] + 1e-9 and inside_from >= 4
    assert np.all(np.diff(joint4[: inside_from + 1]) <= 1e-9)
    lower, upper = np.array(PANDA_LOWER[:7]), np.array(PANDA_UPPER[:7])
    inside = positions[-1, :7]
    assert np.all(inside >= lower - 1e-9) and np.all(inside <= upper + 1e-9)
    _values(
        harness,
        node,
        0.0,
        lambda v: int(v.get('chunks_outside_limits', 0)) >= 1,
        'chunks_outside_limits',
    )


def test_malformed_joint_states_are_dropped_at_once_each_with_its_reason(system):
    harness, _, _, node = system
    publisher = harness.node.create_publisher(JointState, 'joint_states', qos_profile_sensor_data)
    # a message published before the node's subscription matched this publisher is lost
    harness.wait_for(
        lambda: publisher.get_subscription_count() > 0, 10, 'the node to subscribe', node.log
    )
    start = harness.now()
    for names, positions in (
        ([*JOINTS[:4], JOINTS[3], *JOINTS[4:]], [*POSE[:4], 2.5, *POSE[4:]]),
        (JOINTS, POSE[:7]),
    ):
        msg = JointState(name=names, position=positions)
        msg.header.stamp = to_time(harness.now())
        publisher.publish(msg)
    values = _values(
        harness,
        node,
        start,
        lambda v: (
            int(v.get('dropped_duplicate_joint_name', 0)) >= 1
            and int(v.get('dropped_joint_count_mismatch', 0)) >= 1
        ),
        'both malformed joint states counted',
        timeout=10.0,
    )
    assert 'skewed' not in values['last_refusal']
    harness.node.destroy_publisher(publisher)
    _trajectories(harness, node, 1, harness.now())  # the node went on


def test_one_message_from_the_future_does_not_block_the_node(system, clips):
    harness, _, _, node = system
    _trajectories(harness, node, 1, harness.now())
    camera = harness.node.create_publisher(Image, 'wrist_image_left', CAMERA_QOS)
    joints = harness.node.create_publisher(JointState, 'joint_states', qos_profile_sensor_data)
    start = harness.now()
    for _ in range(3):  # best effort: send it a few times
        camera.publish(ROS_MESSAGES.image(to_ns(start + 60.0), clips['wrist_image_left'][0]))
        future_state = JointState(name=JOINTS, position=POSE)
        future_state.header.stamp = to_time(start + 30.0)
        joints.publish(future_state)
    values = _values(
        harness,
        node,
        start,
        lambda v: int(v.get('dropped_future_stamp', 0)) >= 2,
        'the messages from the future dropped',
    )
    assert 'ahead of its receipt' in values['last_drop']
    # good messages keep arriving: the node goes on well within the 30-60 s of the bad stamps
    after = _trajectories(harness, node, 2, start, timeout=30.0)
    assert all(stamp_seconds(m.header.stamp) < start + 5.0 for m in after)
    harness.node.destroy_publisher(camera)
    harness.node.destroy_publisher(joints)


def test_clock_jumping_back_clears_the_inputs_and_session_then_resumes(system):
    harness, _, clock, node = system
    _trajectories(harness, node, 1, harness.now())
    # arrival times jump back with the clock: count messages instead
    seen = len(harness.messages('preview'))
    jumped_from = harness.now()
    clock.jump(-30.0)
    harness.wait_for(lambda: harness.now() < jumped_from - 20.0, 10, 'the jump', node.log)
    _values(harness, node, 0.0, lambda v: int(v['time_jumps']) >= 1, 'a time jump')
    noticed = len(harness.messages('preview'))

    def new_timeline(msg):
        return stamp_seconds(msg.header.stamp) < jumped_from - 20.0

    resumed = harness.wait_for(
        lambda: [m for m in harness.messages('preview')[seen:] if new_timeline(m)],
        30.0,
        'a trajectory answering the new timeline',
        node.log,
    )
    # once the node noticed the jump, nothing answering old-timeline inputs is published
    assert all(is_hold(m) or new_timeline(m) for m in harness.messages('preview')[noticed:])
    # and the command never jumps: the new plan starts within a step of the held command
    holds = [m for m in harness.messages('preview')[seen:] if is_hold(m)]
    assert holds, 'no hold when the clock jumped'
    held = np.array(holds[0].points[-1].positions)
    first = np.array(resumed[0].points[0].positions)
    assert np.all(np.abs(first[:7] - held[:7]) <= MAX_DELTA + 1e-9)


@pytest.mark.parametrize(
    ('camera', 'size'),
    [('wrist_image_left', (720, 1280)), ('exterior_image_2_left', (1080, 1920))],
)
def test_native_camera_sizes_work_by_default(system, clips, camera, size):
    harness, stream, _, node = system
    _trajectories(harness, node, 1, harness.now())
    scale = size[0] // 180
    big = [np.repeat(np.repeat(f, scale, axis=0), scale, axis=1) for f in clips[camera][:5]]
    assert big[0].shape == (*size, 3)
    frames = iter(range(10**9))
    stream.override[camera] = lambda now: ROS_MESSAGES.image(
        to_ns(now), big[next(frames) % len(big)], camera
    )
    start = harness.now()
    try:
        # answers to observations stamped 0.5 s after the switch: that camera's frame in them
        # (within max_skew of the newest input) is one of the native-size frames
        harness.wait_for(
            lambda: (
                len(
                    [
                        m
                        for m in harness.messages('preview', start)
                        if not is_hold(m) and stamp_seconds(m.header.stamp) > start + 0.5
                    ]
                )
                >= 2
            ),
            TIMEOUT,
            'two trajectories answering native-size frames',
            node.log,
        )
        _, values = node_diagnostics(harness, start, lambda s, v: True)
        assert 'bad_image' not in values['last_refusal'], values['last_refusal']
        assert 'skewed' not in values['last_refusal'], values['last_refusal']
    finally:
        del stream.override[camera]


def test_node_reports_its_own_overhead_by_stage(system):
    harness, _, _, node = system
    _trajectories(harness, node, 2, harness.now())
    values = _values(
        harness,
        node,
        harness.now(),
        lambda v: v.get('chunk_to_publish_p50_ms', 'nan') != 'nan',
        'stage timings',
    )
    for stage in ('observation_to_query', 'chunk_to_publish'):
        p50, p95 = (float(values[f'{stage}_{q}_ms']) for q in ('p50', 'p95'))
        assert 0.0 < p50 <= p95, (stage, p50, p95)
