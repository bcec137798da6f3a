# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Chunks discarded because the input went bad while inferring are counted, not logged each.

Over DDS: a slow scripted OpenPI policy (every answer after 1 s), the policy node on it, and
this harness publishing the cameras continuously and the joint states in bursts, so that the
input has gone bad again by the time most answers arrive. The node logs the warning once per
period (saying how many it left out), while diagnostics count every discarded chunk.
"""

import socket
import subprocess
import sys
import time

from node_support import CONFIG, REPO, Harness, NodeProcess, RobotStream, node_diagnostics, ros_env
import pytest

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 120.0
WARNING = 'chunk not used: input went bad while inferring'
#: The policy node's least seconds between two warnings of one kind (policy_node.WARNING_PERIOD).
PERIOD = 10.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def test_chunks_discarded_while_the_input_is_bad_are_throttled_in_the_log(tmp_path):
    from diagnostic_msgs.msg import DiagnosticArray

    from dreamzero_ros.droid_clips import demo_clips

    port = _free_port()
    with open(tmp_path / 'policy.log', 'w') as policy_log:
        policy = subprocess.Popen(
            [sys.executable, str(REPO / 'test' / 'slow_policy_peer.py'), str(port), '1.0'],
            cwd=REPO, env={**ros_env(), 'PYTHONUNBUFFERED': '1'}, stdout=policy_log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    harness = Harness('discard_harness')
    harness.record('diagnostics', DiagnosticArray, '/diagnostics')
    stream = RobotStream(harness, demo_clips(30)[0])
    node = NodeProcess(
        tmp_path / 'node.log',
        'engine.backend:=remote',
        f'engine.remote_uri:=ws://127.0.0.1:{port}',
        'engine.warmup:=false',
        'scheduler.step_duration:=0.0',
        'scheduler.min_replan_period:=0.0',
        'max_age:=0.3',
        'controller_watch.state_timeout:=60.0',  # the joint-state gaps are the point here
        'task.input_timeout:=60.0',
        params_file=CONFIG / 'cpu_small.yaml',
    )
    try:
        harness.wait_for(lambda: 'configured:' in node.log(), TIMEOUT, 'configure', node.log)
        # joint states for 0.2 s of every 1.5 s: a query starts when they come back and its
        # answer (1 s later) finds them 0.8 s gone, past max_age
        start = time.monotonic()
        while time.monotonic() - start < 30.0:
            stream.joints_on = (time.monotonic() - start) % 1.5 < 0.2
            time.sleep(0.02)
        stream.joints_on = True
        elapsed = time.monotonic() - start
        _, values = harness.wait_for(
            lambda: node_diagnostics(harness, 0.0, lambda _, v: int(v['chunks_discarded']) >= 5),
            30,
            'at least 5 discarded chunks in diagnostics',
            node.log,
        )
        lines = [line for line in node.log().splitlines() if WARNING in line]
        discarded = int(values['chunks_discarded'])
        assert lines, node.log()[-3000:]
        assert len(lines) <= 2 + elapsed / PERIOD, (discarded, lines)
        assert len(lines) < discarded
        assert any('more since' in line and 'not logged' in line for line in lines[1:]), lines
    finally:
        stream.close()
        node.stop()
        policy.terminate()
        policy.wait(10)
        harness.close()
