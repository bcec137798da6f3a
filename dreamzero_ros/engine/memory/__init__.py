# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Memory options: what a configuration needs of the device, and offloading to fit a smaller GPU."""
