# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""dreamzero_ros: DreamZero on a robot through ROS 2."""
