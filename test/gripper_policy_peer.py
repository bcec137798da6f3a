# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""An OpenPI server whose policy holds the arm and closes, then opens, the gripper.

``python gripper_policy_peer.py PORT CLOSED_CHUNKS``: the first CLOSED_CHUNKS chunks say
gripper 1.0 (closed, DROID's convention), the later ones 0.0 (open).
"""

import sys
import time

import numpy as np

from dreamzero_ros.openpi.server import OpenPIServer
from dreamzero_ros.openpi.server_config import ServerConfig
from dreamzero_ros.policy_types import ActionChunk, Observation


class GripperScript:
    """Holds the observed joints; gripper 1.0 for the first chunks, then 0.0."""

    metadata = {'action_horizon': 24}

    def __init__(self, closed_chunks: int) -> None:
        self.closed_chunks = closed_chunks
        self.chunks = 0

    def reset(self, session_id: str = 'default') -> None:
        """Sessions do not matter here."""

    def infer(self, observation: Observation) -> ActionChunk:
        """24 rows at the observed joints, the gripper by the script."""
        gripper = 1.0 if self.chunks < self.closed_chunks else 0.0
        self.chunks += 1
        row = np.concatenate([observation.joint_position, [gripper]])
        return ActionChunk(np.tile(row, (24, 1)), observation.stamp, 1 / 15, self.chunks)


if __name__ == '__main__':
    port, closed = int(sys.argv[1]), int(sys.argv[2])
    handle = OpenPIServer(GripperScript(closed), ServerConfig(port=port)).start()
    print(f'serving on {port}', flush=True)
    while True:
        time.sleep(1.0)
