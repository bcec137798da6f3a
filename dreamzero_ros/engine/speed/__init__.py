# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Speed applied from outside the reference networks: compile, FP8 linears, fused kernels."""
