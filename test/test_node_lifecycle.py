# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Lifecycle round trips of the node over real DDS, with CFG-parallel worker ranks over gloo.

Transitions are requested through the node's ``~/change_state`` service and checked through
``~/get_state``, as ros2/demos' lifecycle tests do; the node, its worker rank and the test are
separate processes.
"""

import time

from node_support import (
    CONFIG,
    NODE,
    Harness,
    NodeProcess,
    RobotStream,
    alive,
    child_pids,
)
import pytest

TIMEOUT = 120.0
#: Rank 0's wait for the worker and for each collective; the node idles longer than this.
WORKER_TIMEOUT = 20.0


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    from dreamzero_ros.engine.random_checkpoint import write_random_checkpoint

    return write_random_checkpoint(tmp_path_factory.mktemp('tiny'), preset='tiny')


def _chunks_after(harness, since):
    return [m for m in harness.messages('controller', since) if m.header.stamp.sec]


def _assert_serves_chunks(harness, node, what):
    since = harness.now()
    harness.wait_for(lambda: len(_chunks_after(harness, since)) >= 1, TIMEOUT, what, node.log)


def test_round_trip_restarts_the_worker_ranks_and_applies_new_parameters(checkpoint, tmp_path):
    from trajectory_msgs.msg import JointTrajectory

    from dreamzero_ros.droid_clips import demo_clips

    node = NodeProcess(
        tmp_path / 'node.log',
        'autostart:=false',
        f'engine.checkpoint:={checkpoint}',
        'engine.cfg_parallel:=2',
        f'engine.worker_timeout:={WORKER_TIMEOUT}',
        'engine.warmup:=false',
        'engine.num_threads:=1',
        params_file=CONFIG / 'cpu_small.yaml',
    )
    harness = Harness('lifecycle_harness')
    harness.record('controller', JointTrajectory, 'joint_trajectory_controller/joint_trajectory')
    stream = RobotStream(harness, demo_clips(15)[0])
    workers_seen = []
    try:
        assert harness.lifecycle_state(NODE) == 'unconfigured'
        for round_trip, max_age in enumerate((2, 1.5)):
            # configure-time parameters change while unconfigured (an integer for a double too)
            assert harness.set_parameter(NODE, 'max_age', max_age).successful
            assert harness.change_state(NODE, 'configure'), node.log()[-3000:]
            assert harness.lifecycle_state(NODE) == 'inactive'
            workers = child_pids(node.process.pid)
            assert len(workers) == 1, node.log()[-3000:]
            workers_seen.append(workers.pop())
            refused = harness.set_parameter(NODE, 'max_age', 3.0)
            assert not refused.successful and 'unconfigured' in refused.reason
            assert harness.get_parameters(NODE, ['max_age'])['max_age'] == float(max_age)

            if round_trip == 0:  # idle (inactive) past the collective timeout: the worker waits
                time.sleep(WORKER_TIMEOUT + 2)
                assert alive(workers_seen[-1])
            assert harness.change_state(NODE, 'activate')
            assert harness.lifecycle_state(NODE) == 'active'
            _assert_serves_chunks(harness, node, f'a chunk from CFG parallel, round {round_trip}')

            assert harness.change_state(NODE, 'deactivate')
            assert harness.lifecycle_state(NODE) == 'inactive'
            assert harness.change_state(NODE, 'cleanup')
            assert harness.lifecycle_state(NODE) == 'unconfigured'
            end = time.monotonic() + 15
            while alive(workers_seen[-1]) and time.monotonic() < end:
                time.sleep(0.05)
            assert not alive(workers_seen[-1]), 'cleanup left the worker rank running'
        assert workers_seen[0] != workers_seen[1]
        assert node.log().count('CFG parallel: rank 0 of 2') == 2
    finally:
        stream.close()
        harness.close()
        status = node.stop()
    assert status == 0, node.log()[-3000:]
    assert not any(alive(pid) for pid in workers_seen)
