# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Several ranks for one engine: the cfg x tp mesh, tensor-parallel shards of the DiT."""
