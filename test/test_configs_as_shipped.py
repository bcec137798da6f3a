# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Each shipped config drives the simulated arm for a few chunks, as sim.launch.py runs it.

Three processes over DDS, the ones ``launch/sim.launch.py`` starts: the policy node on the
config file, ``dreamzero-sim-arm`` with the parameters made from that file, and
``dreamzero-demo-stream`` publishing the cameras. Only what needs a real checkpoint or a GPU is
overridden (a tiny random-weight checkpoint on the CPU); droid.yaml's gripper action runs on
control_msgs built from source (interface_support). Every other parameter is read back from the
node and must be the file's.
"""

import json
import sys

from interface_support import control_msgs_env
from machine_load import load_factor
from node_support import CONFIG, NODE, diagnostic_count
import pytest

from dreamzero_ros.core.config.launch_plan import sim_arm_parameters
from dreamzero_ros.core.config.node_config import PARAMETERS, defaults, read_params_file

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 180.0  # generous: the CPU is shared with other test processes
CHUNKS = 3

#: What droid.yaml names that needs the 14B checkpoint and GPUs: the CPU equivalents.
CPU_ENGINE = {
    'engine.device': 'cpu',
    'engine.dtype': 'float32',
    'engine.num_threads': 1,
    'engine.compile': False,
    'engine.fp8_linear': 'off',
    'engine.attention_backend': 'auto',
    'engine.cfg_parallel': 1,
}


def _ros_arg(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return '[' + ', '.join(_ros_arg(v) for v in value) + ']'
    if isinstance(value, str):
        return json.dumps(value)  # quoted: 'off' must stay a string, not YAML's false
    return str(value)


@pytest.mark.parametrize('name', ['cpu_small.yaml', 'droid.yaml'])
def test_shipped_config_drives_the_simulated_arm(tmp_path, monkeypatch, closed_loop, name):
    from diagnostic_msgs.msg import DiagnosticArray
    from std_msgs.msg import String
    from trajectory_msgs.msg import JointTrajectory

    from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint

    shipped = read_params_file(CONFIG / name)
    overrides = {
        'engine.checkpoint': str(write_random_checkpoint(tmp_path / 'ckpt', 'tiny')),
        # the loaded machine's stalls are no controller fault (node_support.NodeProcess)
        'controller_watch.state_timeout': round(2.0 * load_factor(), 3),
    }
    if name == 'droid.yaml':
        overrides.update(CPU_ENGINE)
        assert shipped['gripper.interface'] == 'action'
        assert shipped['gripper.command_name'] == 'panda_gripper/gripper_action'
        for key, value in control_msgs_env().items():  # no wheel: built from source
            monkeypatch.setenv(key, value)
    config = {**shipped, **overrides}
    arm_parameters = sim_arm_parameters(config)
    assert arm_parameters['gripper.joint'] == shipped['gripper_joint_name']

    loop = closed_loop('configs_harness')
    harness = loop.harness
    harness.record('diagnostics', DiagnosticArray, '/diagnostics')
    harness.record('rejected', String, '/sim_arm/rejected')
    harness.record('trajectory', JointTrajectory, {**defaults(), **shipped}['trajectory_topic'])
    arm = loop.start_sim(
        *(f'{key}:={_ros_arg(value)}' for key, value in arm_parameters.items()), node='sim_arm'
    )
    loop.start_peer(
        'stream',
        [sys.executable, '-m', 'dreamzero_ros.ros.demo_stream', '--no-joint-states',
         '--frames', '30'],
    )  # fmt: skip
    node = loop.start_node(
        *(f'{key}:={_ros_arg(value)}' for key, value in overrides.items()),
        params_file=CONFIG / name,
    )

    def log() -> str:
        return node.log()[-6000:] + '\n--- sim arm:\n' + arm.log()

    names = [spec.name for spec in PARAMETERS]
    values = harness.get_parameters(NODE, names)
    expected = {**defaults(), **shipped, **overrides}
    for key in names:
        want = expected[key]
        want = list(want) if isinstance(want, tuple) else want
        got = list(values[key]) if isinstance(values[key], list | tuple) else values[key]
        assert got == pytest.approx(want) if isinstance(want, float) else got == want, key
    if not shipped['start_enabled']:  # a real robot's config: enable as an operator does
        harness.wait_for(lambda: harness.lifecycle_state(NODE) == 'active', TIMEOUT,
                         'the node to activate', log)  # fmt: skip
        assert loop.enable().success
    harness.wait_for(
        lambda: diagnostic_count(harness, 'trajectories_accepted') >= CHUNKS,
        TIMEOUT,
        f'{CHUNKS} trajectories accepted',
        log,
    )
    assert harness.messages('rejected') == [], log()
    if shipped.get('gripper.interface') == 'action':  # the goal reached the action server
        harness.wait_for(lambda: 'gripper goal: position' in arm.log(), 30,
                         'a GripperCommand goal', log)  # fmt: skip
    assert 'missing' not in node.log(), log()
