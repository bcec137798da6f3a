# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Chunks discarded because the input went bad while inferring are counted, not logged each.

Over DDS: a slow scripted OpenPI policy (every answer after 1 s), the policy node on it, and
this harness publishing the cameras continuously and the joint states in bursts, so that the
input has gone bad again by the time most answers arrive. The node logs the warning once per
period (saying how many it left out), while diagnostics count every discarded chunk.
"""

import time

from node_support import node_diagnostics
import pytest

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

TIMEOUT = 120.0
WARNING = 'chunk not used: input went bad while inferring'
#: The policy node's least seconds between two warnings of one kind (policy_node.WARNING_PERIOD).
PERIOD = 10.0


def test_chunks_discarded_while_the_input_is_bad_are_throttled_in_the_log(closed_loop):
    from diagnostic_msgs.msg import DiagnosticArray

    from dreamzero_ros.droid_clips import demo_clips

    loop = closed_loop('discard_harness')
    loop.serve_policy('slow', '1.0')
    harness = loop.harness
    harness.record('diagnostics', DiagnosticArray, '/diagnostics')
    stream = loop.stream_cameras(demo_clips(30)[0], joint_states=True)
    node = loop.start_node(
        'engine.warmup:=false',
        'scheduler.step_duration:=0.0',
        'scheduler.min_replan_period:=0.0',
        'max_age:=0.3',
        'controller_watch.state_timeout:=60.0',  # the joint-state gaps are the point here
        'task.input_timeout:=60.0',
    )
    loop.wait_configured(TIMEOUT)
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
