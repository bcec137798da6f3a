# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``dreamzero-demo --toward-table``: a policy driving the hand down ends held above the table."""

import re
import subprocess

from node_support import ros_env
import pytest
from script_paths import installed_script

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini


def test_demo_toward_the_table_holds_above_it(tmp_path):
    env = {**ros_env(), 'OMP_NUM_THREADS': '1'}
    env.pop('ROS_DOMAIN_ID')  # the demo picks its own
    command = [
        installed_script('dreamzero-demo'), '--toward-table', '--table-height', '0.3',
        '--preset', 'tiny', '--chunks', '2', '--cache-dir', str(tmp_path), '--timeout', '150',
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=200, env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    summary = re.search(
        r'envelope: (\d+) trajectories cut into a hold \(last: chunk \d+: (\w+) crosses table '
        r'z \+0\.300 at .*\); arm: lowest point (\w+) at ([\d.]+) m, table at 0\.3 m, (\d+) '
        r'updates below it',
        output,
    )
    assert summary is not None, output
    cuts, _, _, lowest, below = summary.groups()
    assert int(cuts) >= 1 and int(below) == 0
    # the arm went down towards the table (the shoulder link stays at 0.333 m) and stopped above
    assert 0.3 < float(lowest) < 0.333, output
