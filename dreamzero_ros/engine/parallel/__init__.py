# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Several processes for one engine: CFG branches on their own ranks, tensor-parallel shards."""
