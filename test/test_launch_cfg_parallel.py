# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""CFG parallel as the launch file starts it: the node (rank 0) and a worker rank, over gloo.

The processes are the ones ``dreamzero.launch.py`` would start (its plan, computed by
``plan_launch``), run here without ``ros2 launch``: the worker with the plan's command and
environment, the node with the config file plus the plan's overrides. Nobody runs torchrun.
"""

import socket
import subprocess

from node_support import ARM, CONFIG, Harness, NodeProcess, RobotStream, ros_env
from script_paths import installed_script

from dreamzero_ros.core.launch_plan import plan_launch
from dreamzero_ros.core.node_config import read_params_file

TIMEOUT = 120.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def test_node_and_worker_rank_serve_chunks(tmp_path):
    from trajectory_msgs.msg import JointTrajectory

    from dreamzero_ros.droid_clips import demo_clips
    from dreamzero_ros.engine.random_checkpoint import write_random_checkpoint

    checkpoint = write_random_checkpoint(tmp_path / 'tiny', preset='tiny')
    port = _free_port()
    config = {**read_params_file(CONFIG / 'cpu_small.yaml'), 'engine.master_port': port}
    plan = plan_launch(config, checkpoint=str(checkpoint), cfg_parallel='2', dry_run='false')
    (worker_spec,) = plan.workers
    assert worker_spec.env['RANK'] == '1' and worker_spec.env['WORLD_SIZE'] == '2'
    worker_log = open(tmp_path / 'worker.log', 'w')  # noqa: SIM115 - closed below
    worker = subprocess.Popen(
        [installed_script(worker_spec.cmd[0]), *worker_spec.cmd[1:]],
        env={**ros_env(), 'OMP_NUM_THREADS': '1', **worker_spec.env},
        stdout=worker_log,
        stderr=subprocess.STDOUT,
    )
    overrides = [
        f'{name}:={str(value).lower() if isinstance(value, bool) else value}'
        for name, value in plan.node_parameters.items()
    ]
    node = NodeProcess(
        tmp_path / 'node.log',
        *overrides,
        f'engine.master_port:={port}',
        'engine.warmup:=false',
        'engine.num_threads:=1',
        params_file=CONFIG / 'cpu_small.yaml',
    )
    harness = Harness('cfg_parallel_harness')
    harness.record('controller', JointTrajectory, 'joint_trajectory_controller/joint_trajectory')
    clips, _ = demo_clips(15)
    stream = RobotStream(harness, clips)
    try:
        harness.wait_for(
            lambda: len([m for m in harness.messages('controller') if m.header.stamp.sec]) >= 2,
            TIMEOUT,
            'two chunks from the CFG-parallel engine',
            node.log,
        )
        trajectory = next(m for m in harness.messages('controller') if m.header.stamp.sec)
        assert trajectory.joint_names == ARM
        assert 'CFG parallel: rank 0 of 2' in node.log()
    finally:
        stream.close()
        harness.close()
        status = node.stop()
        try:
            worker_status = worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker_status = worker.wait()
        worker_log.close()
    worker_output = (tmp_path / 'worker.log').read_text()
    assert status == 0, node.log()[-3000:]
    assert worker_status == 0, worker_output[-3000:]
    assert 'shut down' in worker_output
