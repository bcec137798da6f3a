# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The MuJoCo simulator, without ROS: scenes, physics behind JTC's rules, cameras, tasks."""
