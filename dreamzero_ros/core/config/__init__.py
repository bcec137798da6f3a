# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The node's parameters: declarations, derived settings, validation, launch plans."""
