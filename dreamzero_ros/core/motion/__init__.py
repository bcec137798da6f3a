# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The motion commanded: splines, time scaling, hand-over, braking, limits, envelope, JTC."""
