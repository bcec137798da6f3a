# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Where the networks live and what they need of the device.

Building them in place (device, host, streamed block by block; sharded and FP8 before anything
is allocated), and the estimate that refuses a configuration that cannot fit.
"""
