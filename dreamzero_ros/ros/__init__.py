# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Thin rclpy layer: the policy node, message conversions and the demo observation stream."""
