# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The policy the node runs: built from its settings, shared between threads, its API key."""
