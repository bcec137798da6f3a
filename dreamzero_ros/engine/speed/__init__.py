# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Speed applied from outside the reference model: compile, FP8, fused kernels, step cache."""
