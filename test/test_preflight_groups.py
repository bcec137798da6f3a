# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``dreamzero-preflight`` follows the action groups: every controller, its joints, the base.

Over DDS: the AgiBot layout served by two ``dreamzero-sim-arm`` processes (the head apart),
this harness publishing the three cameras, and preflight as its own process with the node's
parameters for AgiBot. Everything up passes with no Panda default in sight; with the head's
process gone, the head's controller and joint states are named failures. The checks' verdicts
are also tested one by one (ROS-free).
"""

import subprocess
import sys

from closed_loop import embodiment_parameters, params_file, random_clips, split_groups
from embodiment_support import write_shipped_checkpoint
from interface_support import control_msgs_env
from node_support import REPO, ros_env
import pytest

from dreamzero_ros.core.config.node_config import build_settings
from dreamzero_ros.core.processes import preflight, preflight_groups
from dreamzero_ros.core.robot.action_groups import load_groups
from dreamzero_ros.core.robot.controller_identity import claim_of, identify
from dreamzero_ros.engine.embodiment import EMBODIMENTS_DIR

AGIBOT = load_groups('agibot', EMBODIMENTS_DIR)
SPECS = {spec.name: spec for spec in AGIBOT}


def test_group_joint_verdicts():
    arm = SPECS['left_arm']
    assert preflight_groups.group_joints(arm, 'joint_states', arm.joints).ok
    missing = preflight_groups.group_joints(arm, 'left/joint_states', arm.joints[:6])
    assert not missing.ok and "left/joint_states lacks ['idx27_arm_l_joint7']" in missing.detail
    topics = preflight_groups.state_topics(AGIBOT, 'joint_states')
    assert list(topics) == ['joint_states']  # the base is measured by its odometry
    assert [s.name for s in topics['joint_states']] == [
        'left_arm', 'right_arm', 'left_effector', 'right_effector', 'head', 'waist'
    ]  # fmt: skip
    assert len(preflight_groups.arm_joints(AGIBOT)) == 18


def test_controller_verdicts():
    claim = claim_of(SPECS['head']).resolved(lambda name: f'/{name}')
    found = preflight_groups.controller(identify(claim, ['/head_controller']), dry_run=False)
    assert found.line() == (
        '[ OK ] controller head: /head_controller (node name) on head_controller/joint_trajectory'
    )
    recorder = preflight_groups.controller(identify(claim, ['/recorder']), dry_run=False)
    assert not recorder.ok and 'subscribed by /recorder, none of them' in recorder.detail
    assert 'joint_trajectory_controller' in recorder.fix
    assert preflight_groups.controller(identify(claim, []), dry_run=True).ok


def test_controller_joint_verdicts():
    head = SPECS['head']
    same = preflight_groups.controller_joints(
        head, '/head_controller', ['idx12_head_joint2', 'idx11_head_joint1'], 'joints'
    )
    assert same.ok
    other = preflight_groups.controller_joints(
        head, '/head_controller', ['idx11_head_joint1', 'neck_pitch'], 'joints'
    )
    assert not other.ok
    assert other.detail == "/head_controller lacks ['idx12_head_joint2'], also has ['neck_pitch']"
    unknown = preflight_groups.controller_joints(head, '/base_driver', None, 'joints')
    assert unknown.ok and 'not compared' in unknown.detail


def test_odometry_verdicts_and_limits():
    base = SPECS['base']
    assert preflight_groups.odometry(base, '').ok
    bad = preflight_groups.odometry(base, 'linear.x is nan')
    assert not bad.ok and bad.detail == 'odom: linear.x is nan'
    limits = preflight_groups.velocity_limits(AGIBOT, [-1.0] * 20 + [-0.2, -0.5], [1.0] * 22)
    assert limits == {'base': ([-0.2, -0.5], [1.0, 1.0])}


def test_an_empty_checkpoint_on_the_cpu_passes_as_the_demo_runs_it():
    """config/cpu_small.yaml leaves engine.checkpoint empty: sim.launch.py and the demo fill it."""
    cpu = build_settings({'engine.device': 'cpu'}).engine
    check = preflight.engine_memory(cpu)
    assert check.ok and 'no GPU memory needed' in check.detail
    gpu = preflight.engine_memory(build_settings({'engine.device': 'cuda:0'}).engine)
    assert not gpu.ok and gpu.detail == 'engine.checkpoint is empty'


def _preflight(params, *overrides):
    args = [sys.executable, '-m', 'dreamzero_ros.ros.preflight', '--params-file', str(params)]
    args += ['--duration', '3']
    for item in overrides:
        args += ['-p', item]
    return subprocess.run(
        args, cwd=REPO, env=ros_env(), capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow  # a live system over DDS: see pytest.ini
def test_preflight_checks_every_agibot_group_and_names_the_head_gone(
    tmp_path, monkeypatch, closed_loop
):
    for name, value in control_msgs_env().items():  # GripperCommand for the effectors
        monkeypatch.setenv(name, value)
    loop = closed_loop('preflight_groups_harness')
    files = split_groups(tmp_path, 'agibot', {'head'})
    loop.start_sim(f'action_groups:={files["main"]}', node='sim_main')
    head = loop.start_sim(f'action_groups:={files["apart"]}', node='sim_head')
    checkpoint = write_shipped_checkpoint(tmp_path / 'agibot', 'agibot')
    safety = (range(18), range(2), range(2))
    parameters = embodiment_parameters(checkpoint, 'agibot', 'agibot', safety)
    # 2 Hz expected: 15 Hz streams drop to ~4-7 Hz on 2 heavily loaded cores
    params = params_file(tmp_path, **parameters, control_rate_hz=2.0, **{'camera_qos.depth': 9})
    loop.stream_cameras(random_clips(parameters['camera_topics']))
    result = _preflight(params)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    for expected in (
        '[ OK ] rate joint_states:',
        '[ OK ] rate odom:',
        '[ OK ] joints of left_arm: all 7 in joint_states',
        '[ OK ] joints of head: all 2 in joint_states',
        '[ OK ] joints of right_effector: all 1 in joint_states',
        '[ OK ] controller left_arm: /left_arm_controller (node name) on '
        'left_arm_controller/joint_trajectory',
        "[ OK ] controller joints left_arm: /left_arm_controller joints = the group's 7 joints",
        '[ OK ] controller head: /head_controller (node name)',
        '[ OK ] controller left_effector: /left_gripper_controller (action server) on '
        'left_gripper_controller/gripper_cmd',
        "[ OK ] controller joints left_effector: /left_gripper_controller joint = the group's "
        '1 joints',
        '[ OK ] controller base: /sim_main (publishes /odom) on cmd_vel',
        '[ OK ] odometry base: odom: usable velocities',
        '[ OK ] GPU memory: cpu',
    ):
        assert expected in out, (expected, out)
    assert 'panda' not in out.lower(), out  # no Panda default on another robot
    head.stop()  # the head's controller and its joint states go
    result = _preflight(params)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert (
        "[FAIL] joints of head: joint_states lacks ['idx11_head_joint1', 'idx12_head_joint2']"
    ) in out, out
    assert '[FAIL] controller head: head_controller/joint_trajectory: nobody subscribes' in out
    assert '[FAIL] controller left_arm' not in out and '[ OK ] controller waist' in out
