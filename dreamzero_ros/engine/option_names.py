# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The names a user picks engine options by.

Free of torch, so that command lines and parameter declarations can offer them without loading
it; the modules that implement the options validate against these tuples.
"""

__all__ = [
    'ATTENTION_BACKENDS',
    'DTYPE_NAMES',
    'FP8_MODES',
    'IMAGE_ENCODER_PLACEMENTS',
    'KV_CACHE_KINDS',
    'STEP_CACHE_MODES',
    'TEXT_ENCODER_PLACEMENTS',
]

#: ``step_cache``: which denoising steps run the DiT (:mod:`.step_cache`).
STEP_CACHE_MODES = ('full', 'static', 'dynamic')
#: ``fp8_linear``: ``off`` (model dtype) or the FP8 scaling granularity (:mod:`.fp8`).
FP8_MODES = ('off', 'rowwise', 'tensorwise')
#: ``attention_backend``: the preferred attention kernel (:mod:`.attention`).
ATTENTION_BACKENDS = ('auto', 'cudnn', 'flash', 'efficient', 'math', 'fa3')
#: ``dtype``: weight and activation dtype.
DTYPE_NAMES = ('bfloat16', 'float16', 'float32')
#: ``kv_cache``: precision of the DiT's self-attention K/V cache (:mod:`.kv_cache`).
KV_CACHE_KINDS = ('model', 'fp8')
#: ``text_encoder``: where umT5 lives -- on the engine's device, on the host computing there
#: (``cpu``), or on the host streamed to the device block by block when encoding (``offload``).
TEXT_ENCODER_PLACEMENTS = ('device', 'cpu', 'offload')
#: ``image_encoder``: where CLIP lives -- on the engine's device, or on the host streamed to the
#: device block by block when it runs (``offload``).
IMAGE_ENCODER_PLACEMENTS = ('device', 'offload')
