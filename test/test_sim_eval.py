# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``dreamzero-sim-eval``: the policy node drives the MuJoCo robot over DDS on simulated time.

Two processes: the policy node (``config/cpu_small.yaml``, ``use_sim_time``), and the tool with
the simulator (physics, JTC, cameras rendered on the CPU, ``/clock``), the recorder and the task
client. The scripted policy (served over OpenPI) must complete the task; the random-weight tiny
model must close the loop: its chunks become trajectories the simulated controller accepts and
the physics follows, recorded in a bag stamped on simulated time, with a video beside its
predicted frames.
"""

import json
import subprocess
import sys

from interface_support import control_msgs_env
from node_support import ros_env
import numpy as np
import pytest

from dreamzero_ros.replay.bag_io import BagReader

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini


def _evaluate(tmp_path, *args, env=None):
    output = tmp_path / 'eval'
    result = subprocess.run(
        [sys.executable, '-m', 'dreamzero_ros.sim_eval', '-o', str(output), '--episodes', '1',
         '--real-time-factor', '0', *args],
        env={**ros_env(), 'PYTHONUNBUFFERED': '1', 'XDG_CACHE_HOME': str(tmp_path / 'cache'),
             **(env or {})},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    log = (output / 'policy_node.log').read_text() if (output / 'policy_node.log').exists() else ''
    assert result.returncode == 0, (
        f'{result.stdout[-3000:]}\n{result.stderr[-3000:]}\n{log[-3000:]}'
    )
    return output, json.loads((output / 'report.json').read_text()), result.stdout


def test_a_node_that_cannot_start_ends_the_evaluation_in_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, '-m', 'dreamzero_ros.sim_eval', '-o', str(tmp_path / 'eval'),
         '--checkpoint', str(tmp_path / 'no_checkpoint')],
        env={**ros_env(), 'PYTHONUNBUFFERED': '1'}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 4, result.stdout + result.stderr  # a connection failed
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith('dreamzero-sim-eval: error: the policy node exited'), lines
    assert 'policy_node.log' in lines[-1] and 'Traceback' not in result.stderr
    assert (tmp_path / 'eval' / 'policy_node.log').read_text()


def test_the_scripted_policy_completes_the_task_through_the_node(tmp_path):
    output, report, stdout = _evaluate(
        tmp_path, '--scripted', '--time-limit', '20', '--seed', '3',
        '-p', 'scheduler.min_replan_period:=0.5',
    )  # fmt: skip
    episode = report['episodes'][0]
    assert report['overall']['success_rate'] == 1.0, stdout
    assert 0 < episode['time_to_success'] < 20 and episode['outcome'] == 'canceled'
    assert episode['arm_rejections'] == 0 and episode['safety']['envelope_cuts'] == 0
    assert '1/1 episodes succeeded (100 %)' in stdout
    with BagReader(output / episode['bag']) as bag:
        assert bag.verify(list(bag.topics)).complete
        for topic in ('/wrist_image_left/compressed', '/exterior_image_1_left/compressed',
                      '/joint_states', '/joint_trajectory_controller/joint_trajectory',
                      '/dreamzero_policy/action_chunk', '/dreamzero_sim/task'):  # fmt: skip
            assert bag.message_count(topic) > 0, topic
        # the instruction once (an episode's start, for an export cutting episodes by it)
        task = [m.data for _, _, m in bag.messages(['/dreamzero_sim/task'])]
        assert task == [episode['instruction']]
        success = [m.data for _, _, m in bag.messages(['/dreamzero_sim/task_success'])]
        assert success[0] is False and success[-1] is True


def test_the_franka_gripper_action_grasps_in_the_physics(tmp_path):
    """GripperCommand as franka_gripper serves it: a goal closing on an object ends stalled."""
    output, report, stdout = _evaluate(
        tmp_path, '--scripted', '--time-limit', '20', '--seed', '5',
        '-p', 'scheduler.min_replan_period:=0.5', '-p', 'gripper.interface:=action',
        '-p', 'gripper.command_name:=panda_gripper/gripper_action',
        env=control_msgs_env(),
    )  # fmt: skip
    assert report['overall']['success_rate'] == 1.0, stdout
    episode = report['episodes'][0]
    with BagReader(output / episode['bag']) as bag:
        succeeded = {
            bytes(status.goal_info.goal_id.uuid)
            for _, _, message in bag.messages(['/panda_gripper/gripper_action/_action/status'])
            for status in message.status_list
            if status.status == 4  # SUCCEEDED
        }
        fingers = [
            state.position[list(state.name).index('panda_finger_joint1')]
            for _, _, state in bag.messages(['/joint_states'])
        ]
    # the closing goal (position 0) succeeded with the fingers on the block, never at 0
    assert len(succeeded) >= 2  # the close, then the open
    assert min(fingers) > 0.015 and max(fingers) > 0.039


def test_the_tiny_model_closes_the_loop_on_simulated_time(tmp_path):
    # the node's views play each predicted frame at the time it stands for (3 s apart in
    # cpu_small's slow motion), a newer chunk's replacing those still to come: the second
    # query waits until the first chunk's first predicted frame has played (about 5 s in), and
    # simulated time runs on while the model infers: 10 s leave room for the second chunk
    output, report, stdout = _evaluate(
        tmp_path, '--preset', 'tiny', '--time-limit', '10',
        '-p', 'scheduler.min_replan_period:=3.5',
    )  # fmt: skip
    episode = report['episodes'][0]
    assert episode['outcome'] == 'time_limit' and episode['chunks'] >= 2, stdout
    assert episode['arm_rejections'] == 0
    with BagReader(output / episode['bag']) as bag:
        states = [m for _, _, m in bag.messages(['/joint_states'])]
        trajectories = [
            m for _, _, m in bag.messages(['/joint_trajectory_controller/joint_trajectory'])
        ]
        chunks = [m for _, _, m in bag.messages(['/dreamzero_policy/action_chunk'])]
    # simulated time: seconds since the simulator started, not the wall clock's epoch
    stamp = chunks[-1].header.stamp.sec + chunks[-1].header.stamp.nanosec * 1e-9
    assert 0 < stamp < 1000
    times = np.array([s.header.stamp.sec + s.header.stamp.nanosec * 1e-9 for s in states])
    positions = np.array([s.position[:7] for s in states])
    assert np.ptp(positions, axis=0).max() > 0.01, 'the arm never moved'
    # the physics follows the trajectories: at each point reached, the measured joints are near
    motions = [t for t in trajectories if t.header.stamp.sec or t.header.stamp.nanosec]
    compared = 0
    for index, trajectory in enumerate(motions[:-1]):
        start = trajectory.header.stamp.sec + trajectory.header.stamp.nanosec * 1e-9
        following = motions[index + 1].header.stamp
        end = following.sec + following.nanosec * 1e-9
        for point in trajectory.points:
            at = start + point.time_from_start.sec + point.time_from_start.nanosec * 1e-9
            if at >= end or at > times[-1]:
                break
            nearest = int(np.argmin(np.abs(times - at)))
            np.testing.assert_allclose(positions[nearest], point.positions, atol=0.05)
            compared += 1
    assert compared >= 3
    # the video: the rendered cameras, and beside them the model's predicted frames (not the
    # grey panel shown before the first prediction)
    import av

    with av.open(str(output / episode['video'])) as video:
        last = [frame.to_ndarray(format='rgb24') for frame in video.decode(video=0)][-1]
    height, width = last.shape[:2]
    assert (height, width) == (360, 1280)
    assert last[:, width // 2 :].std() > 5, 'no predicted frame beside the cameras'
