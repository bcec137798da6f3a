# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The README's live replay as a user runs it: make-bag, the node, live-replay, in processes.

``dreamzero-make-bag --params-file config/cpu_small.yaml`` writes what the node of that file
reads (raw images, the Franka finger joint in metres); ``dreamzero-live-replay`` plays it into
``dreamzero-policy-node --params-file config/cpu_small.yaml -p use_sim_time:=true`` and records
its chunks. A bag made for other inputs records nothing, and live-replay names each mismatch
(topic, image transport, joint) instead of blaming a missing node.
"""

import json
import subprocess
import time

from node_support import CONFIG, end_process, ros_env
import pytest
from script_paths import installed_script

from dreamzero_ros.replay.live_diagnosis import NodeInputs, find_mismatches
from dreamzero_ros.replay.topics import COMPRESSED_IMAGE_TYPE, IMAGE_TYPE, JOINT_STATE_TYPE

CPU_SMALL = CONFIG / 'cpu_small.yaml'
ARM = tuple(f'panda_joint{i}' for i in range(1, 8))


def _tool(name: str, *args: object, timeout: float = 300) -> subprocess.CompletedProcess:
    command = [installed_script(name), *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=ros_env())


@pytest.fixture(scope='module')
def node(tmp_path_factory):
    """The documented node: config/cpu_small.yaml on simulated time (tiny random weights)."""
    from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint

    folder = tmp_path_factory.mktemp('node')
    checkpoint = write_random_checkpoint(folder / 'tiny', preset='tiny')
    log = folder / 'node.log'
    command = [installed_script('dreamzero-policy-node'), '--ros-args', '--params-file']
    command += [
        str(CPU_SMALL),
        '-p',
        'use_sim_time:=true',
        '-p',
        f'engine.checkpoint:={checkpoint}',
    ]
    with open(log, 'w') as output:
        process = subprocess.Popen(
            command,
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**ros_env(), 'PYTHONUNBUFFERED': '1'},
        )
    deadline = time.monotonic() + 300
    while 'configured:' not in log.read_text():
        assert process.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.2)
    yield log
    end_process(process, 30)


@pytest.mark.slow
def test_documented_pair_records_the_node_s_chunks(node, tmp_path):
    bag = tmp_path / 'live_bag'
    made = _tool('dreamzero-make-bag', '-o', bag, '--frames', '45', '--params-file', CPU_SMALL)
    assert made.returncode == 0, made.stderr
    out = tmp_path / 'chunks_bag'
    result = _tool('dreamzero-live-replay', bag, '-o', out, '--wait', '30')
    assert result.returncode == 0, result.stderr[-3000:] + node.read_text()[-3000:]
    summary = json.loads(result.stdout)
    assert summary['published']['/wrist_image_left'] == 45  # raw, as the node reads them
    assert summary['without_subscribers'] == []
    assert summary['recorded']['/dreamzero_policy/action_chunk'] >= 1, summary
    assert out.is_dir()


@pytest.mark.slow
def test_a_bag_for_other_inputs_names_each_mismatch(node, tmp_path):
    bag = tmp_path / 'default_bag'
    made = _tool('dreamzero-make-bag', '-o', bag, '--frames', '15', '--image-format', 'jpeg')
    assert made.returncode == 0, made.stderr
    out = tmp_path / 'chunks_bag'
    result = _tool('dreamzero-live-replay', bag, '-o', out, '--wait', '1', '--linger', '0.5')
    assert result.returncode == 1, result.stderr[-3000:]
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(
        f'dreamzero-live-replay: nothing recorded (no chunk; no {out} written): the node '
        '/dreamzero_policy does not read what the bag holds: '
    ), line
    assert (
        f'it reads {IMAGE_TYPE} on /wrist_image_left, /exterior_image_1_left, '
        f'/exterior_image_2_left (image_transport raw), the bag has {COMPRESSED_IMAGE_TYPE} on '
        '/wrist_image_left/compressed, ' in line
    )
    assert '-p image_transport:=compressed' in line
    assert "it reads joints ['panda_finger_joint1'] on /joint_states" in line
    assert "'panda_gripper'" in line and 'no policy node' not in line
    assert not out.exists()


def test_mismatches_name_the_clock_the_transport_the_cameras_and_the_joints():
    inputs = NodeInputs(
        use_sim_time=False,
        camera_topics=('/cam_a', '/cam_b'),
        image_transport='compressed',
        joint_states_topic='/joint_states',
        arm_joints=ARM,
        gripper_joint='finger',
    )
    bag = {'/cam_a': IMAGE_TYPE, '/other': IMAGE_TYPE, '/joint_states': JOINT_STATE_TYPE}
    found = find_mismatches(inputs, bag, [*ARM[:6], 'finger'])
    assert len(found) == 4, found
    assert found[0].startswith('it runs on the wall clock: start it with -p use_sim_time:=true')
    assert found[1] == (
        f'it reads {COMPRESSED_IMAGE_TYPE} on /cam_a/compressed (image_transport compressed), '
        f"the bag has {IMAGE_TYPE} on /cam_a: make the bag with the node's --params-file, or "
        'run the node with -p image_transport:=raw'
    )
    assert found[2].startswith(f'it reads {COMPRESSED_IMAGE_TYPE} on /cam_b/compressed, the bag')
    assert "(its image topics: ['/cam_a', '/other'])" in found[2]
    assert found[3].startswith("it reads joints ['panda_joint7'] on /joint_states")

    matching = NodeInputs(True, ('/cam_a',), 'raw', '/joint_states', ARM, 'finger')
    assert find_mismatches(matching, bag, [*ARM, 'finger']) == []
    assert 'the bag has none there' in find_mismatches(matching, bag, None)[0]
