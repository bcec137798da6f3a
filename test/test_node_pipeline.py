# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The policy node in its own process, on the real tiny engine, driven over DDS.

One node process serves the whole module; the tests run in file order and each leaves the node
streaming normally. The harness (this process) publishes the real DROID clips and a joint
trajectory at 15 Hz and records what the node publishes.
"""

import time

from closed_loop import ClosedLoop
from node_support import (
    ARM,
    CONFIG,
    JOINTS,
    NODE,
    is_hold,
    latched_qos,
    loaded_input_tolerances,
    node_diagnostics,
)
import numpy as np
import pytest

from dreamzero_ros.core.config.node_config import PARAMETERS, defaults, read_params_file
from dreamzero_ros.core.observations.messages import stamp_seconds
from dreamzero_ros.engine.workers.protocol import free_port

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 90.0  # generous: the CPU is shared with other test processes
STEP = 1.0  # scheduler.step_duration of config/cpu_small.yaml
LIMITS = {**defaults(), **read_params_file(CONFIG / 'cpu_small.yaml')}


def _assert_ends_at_rest(msg) -> None:
    """A hold: one point at rest, or a braking from the motion in force to rest."""
    last = msg.points[-1]
    np.testing.assert_allclose(last.velocities, 0.0, atol=1e-12)
    np.testing.assert_allclose(last.accelerations, 0.0, atol=1e-12)


@pytest.fixture(scope='module')
def clips():
    """The real DROID clips where present; the synthetic stand-in keeps the tests running."""
    from dreamzero_ros.droid_clips import demo_clips

    return demo_clips(45)[0]


@pytest.fixture(scope='module')
def bridge_port():
    return free_port()


#: The key bridge clients must send; the node reads it from a file.
BRIDGE_KEY = 'bridge-key-7f3a'


@pytest.fixture(scope='module')
def bridge_key_file(tmp_path_factory):
    path = tmp_path_factory.mktemp('secrets') / 'bridge_key'
    path.write_text(BRIDGE_KEY + '\n')
    path.chmod(0o600)
    return path


@pytest.fixture(scope='module')
def system(tmp_path_factory, clips, bridge_port, bridge_key_file):
    """(harness, stream, node): a dry-run node with per-step commands and the OpenPI bridge."""
    from diagnostic_msgs.msg import DiagnosticArray
    from std_msgs.msg import Float64MultiArray
    from trajectory_msgs.msg import JointTrajectory

    from dreamzero_ros.ros.conversions import ActionChunkMsg, PolicyStatusMsg

    with ClosedLoop(tmp_path_factory.mktemp('pipeline'), 'pipeline_harness') as loop:
        harness = loop.harness
        # joint_trajectory_controller and the gripper controller of config/cpu_small.yaml,
        # named as ros2_control names them: enable needs every group's controller
        harness.record_controller(
            'controller', JointTrajectory, 'joint_trajectory_controller/joint_trajectory'
        )
        harness.record_controller('gripper', JointTrajectory, 'gripper_controller/joint_trajectory')
        harness.record('preview', JointTrajectory, f'{NODE}/preview_trajectory')
        harness.record('step', Float64MultiArray, 'forward_position_controller/commands')
        harness.record('diagnostics', DiagnosticArray, '/diagnostics')
        if ActionChunkMsg is not None:
            harness.record('chunk', ActionChunkMsg, f'{NODE}/action_chunk')
            harness.record('status', PolicyStatusMsg, f'{NODE}/status')
        node = loop.start_tiny_node(
            'dry_run:=true',
            'step_command.enabled:=true',
            'openpi_bridge.enabled:=true',
            f'openpi_bridge.port:={bridge_port}',
            f'openpi_bridge.api_key_file:={bridge_key_file}',
            *loaded_input_tolerances(),  # a loaded machine delivers the 15 Hz frames late
        )
        stream = loop.stream_cameras(clips, joint_states=True)
        yield harness, stream, node
        assert loop.close() == 0, node.log()[-3000:]


def _wait_chunks(harness, node, key, count, since, **kwargs):
    return harness.wait_motions(key, count, since, kwargs.get('timeout', TIMEOUT), node.log)


def test_dry_run_publishes_previews_and_nothing_to_the_controller(system):
    harness, _, node = system
    previews = _wait_chunks(harness, node, 'preview', 2, 0.0)
    assert previews[0].joint_names == ARM
    assert harness.messages('controller') == []
    assert harness.messages('step') == []
    # the load showed its progress in the node's log: a line per checkpoint shard
    log = node.log()
    assert 'loading weights: ' in log and ' from 2 file(s)' in log, log[-3000:]
    for shard in ('file 1/2 model-00001-of-00002', 'file 2/2 model-00002-of-00002'):
        assert f'loaded weights: {shard}.safetensors' in log, log[-3000:]


def test_chunks_reach_the_controller_with_names_stamps_and_limits(system):
    harness, stream, node = system
    assert harness.set_parameter(NODE, 'dry_run', False).successful
    start = harness.now()
    trajectories = _wait_chunks(harness, node, 'controller', 2, start)
    arrivals = {id(m): t for t, m in harness.received['controller']}
    latencies = {
        stamp_seconds(m.header.stamp): m.inference_latency for m in harness.messages('chunk')
    }
    lower = np.array(LIMITS['safety.joint_lower'])[:7]
    upper = np.array(LIMITS['safety.joint_upper'])[:7]
    max_delta = np.array(LIMITS['safety.max_step_delta'])[:7]
    lead = 0.05  # the hand-over point is at least this far ahead of the chunk's arrival
    published = np.array(stream.stamps)
    for msg in trajectories:
        assert msg.joint_names == ARM  # the gripper has an output of its own
        stamp = stamp_seconds(msg.header.stamp)
        # stamped with the time of an observation the harness published
        assert np.min(np.abs(published - stamp)) < 1e-6
        offsets = np.array([stamp_seconds(p.time_from_start) for p in msg.points])
        steps = offsets / STEP
        # points before the hand-over repeat the plan in force after the chunk's arrival (the
        # lead-in: the controller's hand-over segment is a piece of that plan); the hand-over
        # point and the rows after it lie on the chunk's step grid
        on_grid = np.abs(steps - np.round(steps)) < 1e-6
        handover = int(np.argmax(on_grid))
        assert on_grid[handover] and np.all(on_grid[handover:])
        assert np.all(np.diff(offsets) > 0)
        if stamp in latencies:
            assert np.all(offsets[:handover] >= latencies[stamp] - 1e-3)
        offsets, steps = offsets[handover:], steps[handover:]
        assert np.all(np.diff(steps) > 0.5) and steps[0] >= 1
        # rows already in the past when the chunk reached the node were dropped, no more
        if stamp in latencies:
            assert latencies[stamp] + lead - 1e-3 <= offsets[0]
            assert offsets[0] < latencies[stamp] + lead + STEP + 1e-3
        else:
            assert stamp + offsets[0] >= arrivals[id(msg)] - 0.5
        positions = np.array([p.positions for p in msg.points])
        velocities = np.array([p.velocities for p in msg.points])
        accelerations = np.array([p.accelerations for p in msg.points])  # quintic segments
        assert positions.shape == velocities.shape == accelerations.shape == (len(msg.points), 7)
        np.testing.assert_allclose(velocities[-1], 0.0)  # JTC rejects a moving end
        np.testing.assert_allclose(accelerations[-1], 0.0)  # a Franka needs a still end
        assert np.all(positions >= lower - 1e-9) and np.all(positions <= upper + 1e-9)
        assert np.all(np.abs(np.diff(positions[handover:], axis=0)) <= max_delta + 1e-9)
    commands = harness.wait_for(
        lambda: harness.messages('step', start), TIMEOUT, 'per-step commands', node.log
    )
    values = np.array([m.data for m in commands])
    assert values.shape[1] == 7 and np.all(values >= lower - 1e-9)
    assert np.all(values <= upper + 1e-9)


def test_action_chunk_messages_carry_the_raw_chunk(system):
    harness, _, node = system
    from dreamzero_ros.ros.conversions import ActionChunkMsg

    if ActionChunkMsg is None:
        pytest.skip('the package messages are not built (scripts/build_interfaces.sh)')
    chunks = harness.wait_for(
        lambda: harness.messages('chunk'), TIMEOUT, 'ActionChunk messages', node.log
    )
    for msg in chunks:
        assert msg.horizon == 24 and list(msg.joint_names) == JOINTS
        assert len(msg.positions) == 24 * 8
        assert stamp_seconds(msg.step_duration) == pytest.approx(STEP)
        assert msg.inference_latency > 0 and msg.session_id == 'default'
    chunk_stamps = {stamp_seconds(m.header.stamp) for m in chunks}
    previews = [m for m in harness.messages('preview') if not is_hold(m)]
    assert {stamp_seconds(m.header.stamp) for m in previews} <= chunk_stamps


def test_status_and_diagnostics_report_the_running_node(system):
    harness, _, node = system
    start = harness.now()
    _, values = harness.wait_for(
        lambda: node_diagnostics(harness, start, lambda s, v: v['commanding'] == 'true'),
        10,
        'diagnostics of a commanding node',
        node.log,
    )
    assert int(values['chunks_applied']) >= 2 and float(values['latency_p50_ms']) > 0
    assert float(values['chunk_rate_hz']) > 0 and values['engine_state'] in ('ready', 'inferring')
    if 'status' in harness.received:
        status = harness.wait_for(
            lambda: harness.messages('status', start), 10, '~/status', node.log
        )[-1]
        assert status.state == status.STATE_ACTIVE and status.enabled and not status.dry_run
        assert status.chunks_published >= 2 and status.latency_p50 > 0


def test_openpi_bridge_serves_the_same_engine_to_clients_with_the_key(system, bridge_port):
    from dreamzero_ros.engine.checkpoint.synthetic_droid import random_observation
    from dreamzero_ros.openpi.remote_policy import RemoteOpenPIPolicy

    url = f'ws://127.0.0.1:{bridge_port}'
    with RemoteOpenPIPolicy(url, api_key=BRIDGE_KEY) as remote:
        assert remote.metadata['action_space'] == 'joint_position'
        chunk = remote.infer(random_observation(session_id='bridge-test'))
    assert chunk.actions.shape == (24, 8) and np.all(np.isfinite(chunk.actions))
    with pytest.raises(Exception, match='401'), RemoteOpenPIPolicy(url, api_key='wrong') as other:
        other.infer(random_observation(session_id='bridge-test'))


def test_no_parameter_reveals_the_bridge_key(system):
    harness, _, _ = system
    values = harness.get_parameters(NODE, [spec.name for spec in PARAMETERS])
    assert not [name for name, value in values.items() if BRIDGE_KEY in str(value)]


def test_safety_choices_are_declared_parameters_with_descriptors(system):
    from rcl_interfaces.srv import DescribeParameters

    harness, _, _ = system
    names = ['safety.outside_limits', 'safety.delta_mode', 'gripper_joint_name']
    response = harness.call(
        DescribeParameters, f'{NODE}/describe_parameters', DescribeParameters.Request(names=names)
    )
    described = {d.name: d for d in response.descriptors}
    outside = described['safety.outside_limits']
    assert 'One of: approach, hold.' in outside.additional_constraints
    assert 'approach' in outside.description and 'hold' in outside.description
    assert 'One of: clamp, refuse.' in described['safety.delta_mode'].additional_constraints
    assert 'never in the arm trajectory' in described['gripper_joint_name'].description


def _publish_prompt(system, publisher, prompt: str) -> None:
    """Publish ``prompt`` and wait for the node's ``prompt`` parameter to become it."""
    from std_msgs.msg import String

    harness, _, node = system
    publisher.publish(String(data=prompt))
    harness.wait_for(
        lambda: harness.get_parameters(NODE, ['prompt'])['prompt'] == prompt,
        30,
        f'prompt parameter to follow {prompt!r} on the topic',
        node.log,
    )


def test_prompt_from_a_plain_volatile_publisher_sets_the_parameter(system):
    from std_msgs.msg import String

    harness, _, node = system
    publisher = harness.node.create_publisher(String, f'{NODE}/prompt', 10)  # ros2 topic pub's QoS
    harness.wait_for(
        lambda: publisher.get_subscription_count() > 0, 10, 'the prompt subscriber', node.log
    )
    _publish_prompt(system, publisher, 'open the drawer')
    # the latched subscription does not match it, the volatile one reads it: no false warning
    assert 'incompatible QoS' not in node.log() and 'No messages will' not in node.log()
    harness.node.destroy_publisher(publisher)


def test_prompt_topic_is_latched_and_sets_the_parameter(system):
    from std_msgs.msg import String

    harness, _, node = system
    publisher = harness.node.create_publisher(String, f'{NODE}/prompt', latched_qos())
    _publish_prompt(system, publisher, 'put the marker in the cup')
    # both subscriptions read a latched publisher: the prompt is applied once
    time.sleep(1.0)  # the second delivery arrives within milliseconds of the first
    assert node.log().count("prompt: 'put the marker in the cup'") == 1, node.log()
    harness.node.destroy_publisher(publisher)


def test_reset_holds_and_restarts_the_session(system):
    from std_srvs.srv import Trigger

    harness, _, node = system
    _wait_chunks(harness, node, 'controller', 1, harness.now())
    before = harness.now()
    response = harness.call(Trigger, f'{NODE}/reset', Trigger.Request())
    assert response.success and 'reset' in response.message
    hold = harness.wait_for(
        lambda: [m for m in harness.messages('controller', before) if is_hold(m)],
        10,
        'a hold after the reset',
        node.log,
    )
    assert hold[0].joint_names == ARM
    _assert_ends_at_rest(hold[0])
    if 'chunk' in harness.received:
        harness.wait_for(
            lambda: any(m.chunk_id == 0 for m in harness.messages('chunk', before)),
            TIMEOUT,
            'chunk 0 of the new session',
            node.log,
        )
    _wait_chunks(harness, node, 'controller', 1, harness.now())


@pytest.mark.parametrize(
    ('encoding', 'size', 'expected'),
    [('16UC1', (180, 320), '16UC1'), ('rgb8', (0, 320), 'empty image: 0x320')],
)
def test_bad_images_give_a_diagnostic_and_no_action(system, encoding, size, expected):
    from sensor_msgs.msg import Image

    from dreamzero_ros.ros.conversions import to_time

    harness, stream, node = system
    _wait_chunks(harness, node, 'controller', 1, harness.now())
    height, width = size
    channels = 2 if encoding == '16UC1' else 3

    def bad_image(now):
        msg = Image(
            encoding=encoding, height=height, width=width, step=width * channels,
            data=bytes(height * width * channels),
        )  # fmt: skip
        msg.header.stamp = to_time(now)
        return msg

    start = harness.now()
    stream.override['wrist_image_left'] = bad_image
    try:
        status, values = harness.wait_for(
            lambda: node_diagnostics(harness, start, lambda s, v: 'bad_image' in v['last_refusal']),
            20,
            'a bad_image diagnostic',
            node.log,
        )
        assert expected in values['last_refusal'] and status.level == b'\x01'
        assert int(values['frames_bad']) > 0
        harness.wait_for(
            lambda: [m for m in harness.messages('controller', start) if is_hold(m)],
            10,
            'a hold',
            node.log,
        )
        bad_since = harness.now()
        harness.wait_for(lambda: harness.now() > bad_since + 3 * STEP, 10, 'time', node.log)
        moved = [
            m
            for m in harness.messages('controller', start)
            if not is_hold(m) and stamp_seconds(m.header.stamp) > start + 0.2
        ]
        assert moved == [], 'an observation with a bad image produced an action'
    finally:
        del stream.override['wrist_image_left']
    _wait_chunks(harness, node, 'controller', 1, harness.now())


def test_stale_input_holds_until_fresh_frames_arrive(system):
    harness, stream, node = system
    _wait_chunks(harness, node, 'controller', 1, harness.now())
    stream.cameras_on = False
    stopped = harness.now()
    try:
        hold = harness.wait_for(
            lambda: [m for m in harness.messages('controller', stopped) if is_hold(m)],
            15,
            'a hold on stale input',
            node.log,
        )
        held = np.array(hold[0].points[-1].positions)
        harness.wait_for(
            lambda: node_diagnostics(harness, stopped, lambda s, v: 'stale' in v['last_refusal']),
            15,
            'a stale diagnostic',
            node.log,
        )
        after_hold = harness.now()
        harness.wait_for(lambda: harness.now() > after_hold + 1.0, 5, 'time', node.log)
        steps = [np.array(m.data) for m in harness.messages('step', after_hold + 0.2)]
        assert steps and all(np.allclose(s, held) for s in steps)
        assert not [m for m in harness.messages('controller', after_hold) if not is_hold(m)]
    finally:
        stream.cameras_on = True
    _wait_chunks(harness, node, 'controller', 1, harness.now())


def test_estop_disables_commands_and_enable_restores_them(system):
    from std_msgs.msg import Bool
    from std_srvs.srv import SetBool

    harness, _, node = system
    estop = harness.node.create_publisher(Bool, f'{NODE}/estop', 10)
    harness.wait_for(lambda: estop.get_subscription_count() > 0, 10, 'estop subscriber', node.log)
    before = harness.now()
    estop.publish(Bool(data=True))
    harness.wait_for(
        lambda: node_diagnostics(harness, before, lambda s, v: v['enabled'] == 'false'),
        10,
        'the node to report disabled',
        node.log,
    )
    disabled = harness.now()
    _wait_chunks(harness, node, 'preview', 2, disabled)
    assert harness.messages('controller', disabled + 0.2) == []
    response = harness.call(SetBool, f'{NODE}/enable', SetBool.Request(data=True))
    assert response.success and 'enabled' in response.message
    _wait_chunks(harness, node, 'controller', 1, harness.now())
    harness.node.destroy_publisher(estop)


def test_deactivate_holds_and_activate_resumes(system):
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState, GetState

    harness, _, node = system
    _wait_chunks(harness, node, 'controller', 1, harness.now())

    def transition(transition_id):
        request = ChangeState.Request(transition=Transition(id=transition_id))
        return harness.call(ChangeState, f'{NODE}/change_state', request, timeout=30).success

    before = harness.now()
    assert transition(Transition.TRANSITION_DEACTIVATE)
    state = harness.call(GetState, f'{NODE}/get_state', GetState.Request()).current_state
    assert state.label == 'inactive'
    holds = harness.wait_for(
        lambda: [m for m in harness.messages('controller', before) if is_hold(m)],
        10,
        'a hold on deactivate',
        node.log,
    )
    _assert_ends_at_rest(holds[0])
    inactive = harness.now()
    harness.wait_for(lambda: harness.now() > inactive + 2 * STEP, 10, 'time', node.log)
    assert harness.messages('controller', inactive + 0.2) == []
    assert harness.messages('step', inactive + 0.2) == []
    assert transition(Transition.TRANSITION_ACTIVATE)
    _wait_chunks(harness, node, 'controller', 1, harness.now())
