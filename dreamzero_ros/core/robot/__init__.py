# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The robot: its description (URDF) and limits, kinematics, the Panda, its action groups."""
