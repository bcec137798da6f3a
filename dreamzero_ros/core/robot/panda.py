# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The Franka Panda, DROID's robot: the joints, limits and pose the package's defaults use.

The limits are the datasheet's (Franka Emika, "Robot and interface specifications"); the
position limits carry DROID's normalised gripper (0 open, 1 closed) after the seven arm joints.
"""

from __future__ import annotations

#: The arm joints, as the packaged URDF and franka_description name them.
PANDA_ARM_JOINTS = tuple(f'panda_joint{i}' for i in range(1, 8))
#: The "ready" pose, rad: where the simulated arms start and the demo trajectory moves around.
PANDA_READY = (0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785)

#: Position limits, rad, then the normalised gripper, in action-column order.
PANDA_LOWER = (-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973, 0.0)
PANDA_UPPER = (2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973, 1.0)
#: Joint speed limits, rad/s.
PANDA_MAX_VELOCITY = (2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61)
#: Braking deceleration of a hold, rad/s^2: half the joint acceleration limits.
PANDA_STOP_DECELERATION = (7.5, 3.75, 5.0, 6.25, 7.5, 10.0, 10.0)
#: Joint acceleration limits, rad/s^2.
PANDA_MAX_ACCELERATION = (15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0)
#: Joint jerk limits, rad/s^3.
PANDA_MAX_JERK = (7500.0, 3750.0, 5000.0, 6250.0, 7500.0, 10000.0, 10000.0)
