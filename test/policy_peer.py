# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""An OpenPI server of a scripted policy, the policy of a test's closed loop.

``python policy_peer.py PORT SCRIPT [ARGUMENT]``, SCRIPT one of:

- ``toward_the_table``: :class:`dreamzero_ros.demo_policy.TowardTheTable` (the Panda's hand
  driven down towards the table);
- ``gripper CLOSED_CHUNKS``: the arm held where it is observed, the gripper 1.0 (closed, DROID's
  convention) in the first CLOSED_CHUNKS chunks and 0.0 (open) in the later ones;
- ``slow SECONDS``: the arm held, the gripper open, each answer after SECONDS (a slow model).
"""

import sys
import time

import numpy as np

from dreamzero_ros.demo_policy import TowardTheTable
from dreamzero_ros.openpi.server import OpenPIServer
from dreamzero_ros.openpi.server_config import ServerConfig
from dreamzero_ros.policy_types import ActionChunk, Observation


class GripperScript:
    """Holds the observed joints; gripper 1.0 for the first chunks, then 0.0."""

    metadata = {'action_horizon': 24}

    def __init__(self, closed_chunks: int, delay: float = 0.0) -> None:
        self.closed_chunks = closed_chunks
        self.delay = delay
        self.chunks = 0

    def reset(self, session_id: str = 'default') -> None:
        """Sessions do not matter here."""

    def infer(self, observation: Observation) -> ActionChunk:
        """After ``delay`` seconds, 24 rows at the observed joints, the gripper by the script."""
        time.sleep(self.delay)
        gripper = 1.0 if self.chunks < self.closed_chunks else 0.0
        self.chunks += 1
        row = np.concatenate([observation.joint_position, [gripper]])
        return ActionChunk(np.tile(row, (24, 1)), observation.stamp, 1 / 15, self.chunks)


SCRIPTS = {
    'toward_the_table': lambda: TowardTheTable(),
    'gripper': lambda closed: GripperScript(int(closed)),
    'slow': lambda seconds: GripperScript(0, delay=float(seconds)),
}

if __name__ == '__main__':
    port, script, arguments = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    handle = OpenPIServer(SCRIPTS[script](*arguments), ServerConfig(port=port)).start()
    print(f'serving {script} on {port}', flush=True)
    while True:
        time.sleep(1.0)
