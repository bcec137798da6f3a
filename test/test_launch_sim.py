# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""``sim.launch.py`` run as ``ros2 launch`` runs it: node, simulated robot and cameras in a loop.

Needs launch and launch_ros (a ROS 2 install); test_configs_as_shipped.py runs the kinematic
arm's three processes without launch, test_sim_eval.py the MuJoCo simulator and the node.
"""

import subprocess
import sys

from node_support import REPO, Harness, end_process, ros_env
import pytest
from test_launch_params import _RUN_LAUNCH

TIMEOUT = 180.0


@pytest.mark.parametrize(
    ('simulator', 'arm'), [('kinematic', 'sim_arm'), ('mujoco', 'dreamzero_sim')]
)
def test_sim_launch_drives_the_simulated_arm(tmp_path, simulator, arm):
    pytest.importorskip('launch_ros', reason='launch_ros has no PyPI wheel; runs with ROS 2')
    from diagnostic_msgs.msg import DiagnosticArray

    harness = Harness('sim_launch_harness')
    harness.record('diagnostics', DiagnosticArray, '/diagnostics')
    log_path = tmp_path / 'launch.log'
    log = open(log_path, 'w')  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [sys.executable, '-c', _RUN_LAUNCH, str(REPO / 'launch' / 'sim.launch.py'),
         'preset:=tiny', f'simulator:={simulator}'],
        stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
        env={**ros_env(), 'XDG_CACHE_HOME': str(tmp_path / 'cache')},
    )  # fmt: skip

    def accepted() -> int:
        return max(
            (
                int(value.value)
                for array in harness.messages('diagnostics')
                for status in array.status
                if status.name.startswith(arm) and status.hardware_id == 'dreamzero_sim_arm'
                for value in status.values
                if value.key == 'trajectories_accepted'
            ),
            default=0,
        )

    try:
        harness.wait_for(
            lambda: accepted() >= 2, TIMEOUT, 'the arm to follow 2', log_path.read_text
        )
        text = log_path.read_text()
        assert 'ready: 7 joints' in text and 'rejected' not in text, text
        assert (tmp_path / 'cache' / 'dreamzero_ros' / 'random-tiny').is_dir()
    finally:
        end_process(process, 60)
        log.close()
        harness.close()
