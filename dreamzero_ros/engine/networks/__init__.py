# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The networks: the causal DiT, its attention and K/V cache, the VAE, umT5 and CLIP.

The bottom layer of the engine: these modules import nothing of the engine above them
(options' names aside).  Speed, memory placement, tensor parallel and checkpoint loading act on
them from outside, as Wan2.1's ``wan/distributed`` acts on ``wan/modules``.
"""
