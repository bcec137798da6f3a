# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The gripper command: DROID's convention mapped onto a gripper's positions, with hysteresis.

DROID's policies output the gripper in ``[0, 1]`` with **1 = closed, 0 = open** (DROID's robot
code reads ``position = 1 - width / max_width``). :class:`GripperCommander` maps that value onto
the gripper's own position range (``open_position`` at 0, ``closed_position`` at 1; a Franka
hand: 0.04 m per finger open, 0.0 closed) and decides when a new command is due: a binary gripper
(``binary``) switches to closed above ``close_above`` and back to open below ``open_below`` (a
hysteresis band, so that a value hovering near 0.5 does not chatter); a continuous one is sent
again when the target moves by more than ``min_change`` (policy units).
"""

from __future__ import annotations

from dataclasses import dataclass

#: How a gripper command is sent: a control_msgs/action/GripperCommand goal, a std_msgs/Float64
#: position, a one-point trajectory_msgs/JointTrajectory, or not at all.
GRIPPER_INTERFACES = ('none', 'action', 'float64', 'joint_trajectory')


@dataclass(frozen=True)
class GripperConfig:
    """Position range and switching rule of the gripper command."""

    open_position: float = 0.04
    closed_position: float = 0.0
    binary: bool = True
    close_above: float = 0.6
    open_below: float = 0.4
    min_change: float = 0.05

    def __post_init__(self) -> None:
        if self.open_position == self.closed_position:
            raise ValueError('gripper open and closed positions must differ')
        if not 0.0 <= self.open_below < self.close_above <= 1.0:
            raise ValueError(
                f'need 0 <= open_below < close_above <= 1, got {self.open_below}, '
                f'{self.close_above}'
            )
        if not self.min_change > 0:
            raise ValueError(f'min_change must be > 0, got {self.min_change}')

    def position(self, value: float) -> float:
        """Gripper position for a policy value (clipped into [0, 1]; 1 = closed)."""
        value = min(max(float(value), 0.0), 1.0)
        return self.open_position + value * (self.closed_position - self.open_position)


class GripperCommander:
    """Turns the policy's gripper values into the commands worth sending."""

    def __init__(self, config: GripperConfig) -> None:
        self.config = config
        self._sent: float | None = None

    @property
    def last_sent(self) -> float | None:
        """The policy value of the last command sent (0 or 1 for a binary gripper)."""
        return self._sent

    def reset(self) -> None:
        """Forget the last command: the next value is sent whatever it is."""
        self._sent = None

    def update(self, value: float) -> float | None:
        """The gripper position to send for ``value`` now, or None when nothing changes."""
        config = self.config
        if config.binary:
            target = self._sent
            if value >= config.close_above:
                target = 1.0
            elif value <= config.open_below:
                target = 0.0
            elif target is None:
                target = 1.0 if value >= 0.5 else 0.0
        else:
            target = min(max(float(value), 0.0), 1.0)
            if self._sent is not None and abs(target - self._sent) <= config.min_change:
                return None
        if target == self._sent:
            return None
        self._sent = target
        return config.position(target)
