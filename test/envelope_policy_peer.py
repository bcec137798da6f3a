# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""An OpenPI server whose policy drives the Panda's hand down towards the table.

``python envelope_policy_peer.py PORT``: every chunk moves joint 2 (the shoulder) forward by
1.0 rad from the observed joints over its first 18 rows (1.2 s at 15 Hz), then rests; from the
ready pose that takes the fingertips from 0.487 m to about 0.16 m above the arm's base.
"""

import sys
import time

import numpy as np

from dreamzero_ros.openpi.server import OpenPIServer, ServerConfig
from dreamzero_ros.policy_types import ActionChunk, Observation

SHOULDER = 1.0
HORIZON = 24


class TowardTheTable:
    """Lowers the hand: joint 2 forward by SHOULDER rad per chunk, gripper open."""

    metadata = {'action_horizon': HORIZON}

    def __init__(self) -> None:
        self.chunks = 0

    def reset(self, session_id: str = 'default') -> None:
        """Sessions do not matter here."""

    def infer(self, observation: Observation) -> ActionChunk:
        """24 rows from the observed joints, the shoulder moving forward."""
        self.chunks += 1
        ramp = np.minimum(1.0, np.arange(1, HORIZON + 1) / 18)[:, None]
        step = np.zeros(7)
        step[1] = SHOULDER
        rows = np.asarray(observation.joint_position) + ramp * step
        actions = np.hstack([rows, np.zeros((HORIZON, 1))])
        return ActionChunk(actions, observation.stamp, 1 / 15, self.chunks)


if __name__ == '__main__':
    port = int(sys.argv[1])
    handle = OpenPIServer(TowardTheTable(), ServerConfig(port=port)).start()
    print(f'serving on {port}', flush=True)
    while True:
        time.sleep(1.0)
