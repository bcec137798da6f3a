# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""ROS-free core of the policy node: observation pairing, image codec, safety, scheduling."""
