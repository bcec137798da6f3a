# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The names a user picks engine options by.

Free of torch, so that command lines and parameter declarations can offer them without loading
it; the modules that implement the options validate against these tuples.
"""

__all__ = ['ATTENTION_BACKENDS', 'DTYPE_NAMES', 'FP8_MODES', 'STEP_CACHE_MODES']

#: ``step_cache``: which denoising steps run the DiT (:mod:`.step_cache`).
STEP_CACHE_MODES = ('full', 'static', 'dynamic')
#: ``fp8_linear``: ``off`` (model dtype) or the FP8 scaling granularity (:mod:`.fp8`).
FP8_MODES = ('off', 'rowwise', 'tensorwise')
#: ``attention_backend``: the preferred attention kernel (:mod:`.attention`).
ATTENTION_BACKENDS = ('auto', 'cudnn', 'flash', 'efficient', 'math', 'fa3')
#: ``dtype``: weight and activation dtype.
DTYPE_NAMES = ('bfloat16', 'float16', 'float32')
