# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The reference DreamZero model: networks, sampler, K/V cache and the per-chunk pipeline."""
