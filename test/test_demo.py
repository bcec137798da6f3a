# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The README's first command: ``dreamzero-demo`` prints chunks, latency, the arm following."""

import os
import re
import subprocess

from node_support import ros_env
import pytest
from script_paths import installed_script

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini


def test_demo_drives_the_simulated_arm_and_prints_a_summary(tmp_path):
    executable = installed_script('dreamzero-demo')
    env = {**ros_env(), 'OMP_NUM_THREADS': '1'}
    env.pop('ROS_DOMAIN_ID')  # the demo picks its own
    command = [executable, '--chunks', '2', '--cache-dir', str(tmp_path), '--timeout', '150']
    result = subprocess.run(command, capture_output=True, text=True, timeout=200, env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert result.stdout.startswith(  # what it does, before the checkpoint is written
        "dreamzero-demo: the policy node on a random-weight 'small' model driving a simulated "
        f'arm, 2 chunks (checkpoint and logs in {tmp_path})'
    ), output
    assert "wrote a random-weight 'small' DreamZero checkpoint" in output
    assert (tmp_path / 'random-small' / 'config.json').is_file()
    chunks = re.findall(
        r'chunk (\d+): (\d+) steps x (\d+) columns \(7 arm joint positions in rad, then the '
        r'gripper: 0 open \.\. 1 closed\), ([\d.]+) s from the observation to the chunk; '
        r'first step \[([^\]]+)\]',
        output,
    )
    assert len(chunks) == 2, output
    for _, horizon, width, latency, first_row in chunks:
        assert (int(horizon), int(width)) == (24, 8)
        assert float(latency) > 0 and len(first_row.split()) == 8
    assert re.search(r'summary: 2 chunks in [\d.]+ s', output), output
    assert 'latency p50' in output and 'node (since it started' in output
    assert 'late (too late to apply: fewer than 2 steps still ahead on arrival)' in output
    assert 'random weights' in output
    # commands enabled through the service, the loop closed over the simulated arm
    assert 'dreamzero_policy/enable: commands enabled' in output
    arm = re.search(
        r'arm: (\d+) trajectories accepted, (\d+) rejected; joints moved up to ([\d.]+) rad in '
        r'(\d+) joint states, (\d+) waypoints reached',
        output,
    )
    assert arm, output
    accepted, rejected, moved, states, _ = arm.groups()
    assert int(accepted) > 0 and int(rejected) == 0, output
    assert float(moved) > 1e-3 and int(states) > 10, output
    sent = re.search(r'(\d+) trajectories reached \S+ \((\d+) motions', output)
    assert sent and int(sent.group(2)) > 0, output
    logs = os.listdir(tmp_path / 'logs')
    assert {'policy_node.log', 'sim_arm.log', 'demo_stream.log'} <= set(logs)
    assert 'rejected' not in (tmp_path / 'logs' / 'sim_arm.log').read_text()


def test_demo_drives_the_mujoco_robot_on_simulated_time(tmp_path):
    executable = installed_script('dreamzero-demo')
    env = {**ros_env(), 'OMP_NUM_THREADS': '1'}
    env.pop('ROS_DOMAIN_ID')  # the demo picks its own
    command = [executable, '--chunks', '3', '--preset', 'tiny', '--simulator', 'mujoco',
               '--cache-dir', str(tmp_path), '--timeout', '150']  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=200, env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert 'camera frames: rendered by dreamzero-sim (MuJoCo), on simulated time' in output
    # latency on simulated time (seconds, not the wall clock's epoch), the physics followed
    latency = re.search(r'latency p50 ([\d.]+) s, p95 ([\d.]+) s', output)
    assert latency and float(latency.group(2)) < 60, output
    arm = re.search(r'arm: (\d+) trajectories accepted, (\d+) rejected; joints moved up to', output)
    assert arm and int(arm.group(1)) > 0 and int(arm.group(2)) == 0, output
    logs = os.listdir(tmp_path / 'logs')
    assert 'demo_stream.log' not in logs
    assert 'ready: 7 joints' in (tmp_path / 'logs' / 'sim_arm.log').read_text()


def test_demo_checkpoint_is_written_once(tmp_path):
    from dreamzero_ros.demo import demo_checkpoint

    folder, written = demo_checkpoint(tmp_path, 'tiny')
    assert written and (folder / 'config.json').is_file()
    stamp = (folder / 'config.json').stat().st_mtime_ns
    again, written = demo_checkpoint(tmp_path, 'tiny')
    assert again == folder and not written
    assert (folder / 'config.json').stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == ['random-tiny']
