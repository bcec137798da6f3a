# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""An OpenPI server whose policy holds the observed arm and answers after a fixed delay.

``python slow_policy_peer.py PORT SECONDS``: every chunk takes SECONDS (a slow model); the
chunks are those of gripper_policy_peer.py with the gripper open.
"""

import sys
import time

from gripper_policy_peer import GripperScript

from dreamzero_ros.openpi.server import OpenPIServer
from dreamzero_ros.openpi.server_config import ServerConfig
from dreamzero_ros.policy_types import ActionChunk, Observation


class SlowHold(GripperScript):
    """The arm held at the observed joints, the gripper open, after ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        super().__init__(closed_chunks=0)
        self.delay = delay

    def infer(self, observation: Observation) -> ActionChunk:
        """Sleep, then hold."""
        time.sleep(self.delay)
        return super().infer(observation)


if __name__ == '__main__':
    port, delay = int(sys.argv[1]), float(sys.argv[2])
    handle = OpenPIServer(SlowHold(delay), ServerConfig(port=port)).start()
    print(f'serving on {port}', flush=True)
    while True:
        time.sleep(1.0)
