# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""An OpenPI server whose policy holds the observed arm and answers after a fixed delay.

``python slow_policy_peer.py PORT SECONDS``: every chunk takes SECONDS (a slow model).
"""

import sys
import time

import numpy as np

from dreamzero_ros.openpi.server import OpenPIServer, ServerConfig
from dreamzero_ros.policy_types import ActionChunk, Observation


class SlowHold:
    """24 rows at the observed joints and gripper, after ``delay`` seconds."""

    metadata = {'action_horizon': 24}

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.chunks = 0

    def reset(self, session_id: str = 'default') -> None:
        """Sessions do not matter here."""

    def infer(self, observation: Observation) -> ActionChunk:
        """Sleep, then hold."""
        time.sleep(self.delay)
        self.chunks += 1
        row = np.concatenate([observation.joint_position, observation.gripper_position])
        return ActionChunk(np.tile(row, (24, 1)), observation.stamp, 1 / 15, self.chunks)


if __name__ == '__main__':
    port, delay = int(sys.argv[1]), float(sys.argv[2])
    handle = OpenPIServer(SlowHold(delay), ServerConfig(port=port)).start()
    print(f'serving on {port}', flush=True)
    while True:
        time.sleep(1.0)
