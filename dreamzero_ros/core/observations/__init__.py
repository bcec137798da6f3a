# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What the node receives and shows: images (codec, resize, rates), messages, observations."""
