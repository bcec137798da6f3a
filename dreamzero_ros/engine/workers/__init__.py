# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The worker ranks of a multi-process engine, both halves of their protocol in one place.

An engine of ``cfg_parallel x tensor_parallel`` ranks runs rank 0 in the process that serves it
(the node, ``dreamzero-openpi-server``, ``dreamzero-replay``), which starts ranks 1 .. N-1 as
``dreamzero-engine-worker`` processes (:mod:`.launch`) with its own options on their command
line.  Rank 0's denoiser drives them through a :class:`~.driver.ParallelDriver` layout; a worker
(:mod:`.worker`) loads its DiT and serves rank 0's commands until shut down.  What passes
between them is :mod:`.protocol`.
"""
