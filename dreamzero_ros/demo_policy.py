# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A scripted policy for showing the safety envelope: it drives a Panda's hand towards the table.

Served over the OpenPI protocol by ``dreamzero-demo --toward-table`` (and the envelope's DDS
test), so that the policy node, its envelope and the simulated arm meet a motion that would hit
the table every time: each chunk moves joint 2 (the shoulder) forward by ``shoulder`` rad from the
observed joints over its first 18 rows (1.2 s at 15 Hz), then rests, the gripper open. From the
Panda's ready pose one chunk takes the fingertips from 0.487 m to about 0.16 m above its base.
"""

from __future__ import annotations

import numpy as np

from dreamzero_ros.policy_types import ActionChunk, Observation

HORIZON = 24
STEP_DURATION = 1 / 15


class TowardTheTable:
    """Lowers the hand: joint 2 forward by ``shoulder`` rad per chunk, gripper open."""

    metadata = {'action_horizon': HORIZON}

    def __init__(self, shoulder: float = 1.0) -> None:
        self.shoulder = shoulder
        self.chunks = 0

    def reset(self, session_id: str = 'default') -> None:
        """Sessions do not matter here."""

    def infer(self, observation: Observation) -> ActionChunk:
        """24 rows from the observed joints, the shoulder moving forward."""
        self.chunks += 1
        ramp = np.minimum(1.0, np.arange(1, HORIZON + 1) / 18)[:, None]
        step = np.zeros(len(observation.joint_position))
        step[1] = self.shoulder
        rows = np.asarray(observation.joint_position) + ramp * step
        actions = np.hstack([rows, np.zeros((HORIZON, 1))])
        return ActionChunk(actions, observation.stamp, STEP_DURATION, self.chunks)
