# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The engine on top of the networks: model inputs, the denoising loop, sessions, the engine."""
