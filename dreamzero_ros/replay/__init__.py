# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Rosbag replay evaluation of DreamZero policies, offline and live, without a ROS install."""
