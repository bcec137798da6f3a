# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The control loop: when to query, command and hold; its checks, tasks, controllers, health."""
