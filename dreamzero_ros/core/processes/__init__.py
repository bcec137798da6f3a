# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The processes around the node: preflight checks, lifetimes tied to their parent."""
