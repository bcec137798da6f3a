# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Engine variants to time: named ones, ``label:key=value,...`` ones, or one per step-cache mode.

Named variants add up the speed options:

* ``eager``: the reference path (torch picks the attention kernel, no compilation);
* ``attention``: ``attention_backend=--attention`` (default cudnn; ``fa3``: FlashAttention-3);
* ``compile``: that plus ``compile=True``;
* ``dynamic``: that plus the dynamic step cache;
* ``fp8``: ``compile`` plus ``fp8_linear=--fp8`` (default rowwise);
* ``fp8-dynamic``: that plus the dynamic step cache;
* ``dynamic-min`` / ``fp8-dynamic-min``: the dynamic cache at its fewest DiT calls (4 of 16:
  steps 0, 1, 6, 11) -- what a trained model whose successive velocities agree gets; random
  weights never pass upstream's 0.93 similarity test, so they run all 16 steps.

A ``label:key=value,...`` variant also takes the memory options (``text_encoder``,
``image_encoder``, ``kv_cache``); every setting but ``dynamic-min`` is an engine option
(:class:`dreamzero_ros.engine.options.EngineOptions`), set on the base configuration's.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from dreamzero_ros.engine.config import EngineConfig
from dreamzero_ros.engine.step_cache import StepCacheConfig

__all__ = ['NAMED_VARIANTS', 'VARIANT_KEYS', 'parse_variants', 'variant_config']

_COMPILED = {'attention_backend': 'ATTENTION', 'compile': True}
#: Named variants: settings, with ``ATTENTION`` / ``FP8`` filled from the options.
NAMED_VARIANTS: dict[str, dict[str, Any]] = {
    'eager': {},
    'attention': {'attention_backend': 'ATTENTION'},
    'compile': _COMPILED,
    'dynamic': {**_COMPILED, 'step_cache': 'dynamic'},
    'fp8': {**_COMPILED, 'fp8_linear': 'FP8'},
    'fp8-dynamic': {**_COMPILED, 'fp8_linear': 'FP8', 'step_cache': 'dynamic'},
    'dynamic-min': {**_COMPILED, 'step_cache': 'dynamic-min'},
    'fp8-dynamic-min': {**_COMPILED, 'fp8_linear': 'FP8', 'step_cache': 'dynamic-min'},
}
#: Settings of a ``label:key=value,...`` variant.
SPEED_KEYS = ('compile', 'fp8_linear', 'attention_backend')
MEMORY_KEYS = ('text_encoder', 'image_encoder', 'kv_cache')
VARIANT_KEYS = ('step_cache', *SPEED_KEYS, *MEMORY_KEYS)
#: The dynamic schedule with every similarity test passed, i.e. its fewest DiT calls.
DYNAMIC_MIN = StepCacheConfig(thresholds=(-2.0,), countdowns=(4,))


def _setting(text: str) -> bool | str:
    lowered = text.lower()
    if lowered in ('true', 'on', 'yes'):
        return True
    if lowered in ('false', 'no'):
        return False
    return text


def parse_variants(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    """``(label, settings)`` of every variant (``--variants``, else one per ``--step-cache``)."""
    if not args.variants:
        return [
            (f'static-{args.dit_steps}' if mode == 'static' else mode, {'step_cache': mode})
            for mode in args.step_cache
        ]
    variants = []
    for spec in args.variants:
        if ':' in spec:
            label, _, body = spec.partition(':')
            settings: dict[str, Any] = {}
            for item in filter(None, body.split(',')):
                key, _, value = item.partition('=')
                if key not in VARIANT_KEYS:
                    raise SystemExit(f'unknown variant setting {key!r} (known: {VARIANT_KEYS})')
                settings[key] = _setting(value)
        elif spec in NAMED_VARIANTS:
            label = spec
            settings = {
                key: {'ATTENTION': args.attention, 'FP8': args.fp8}.get(value, value)
                for key, value in NAMED_VARIANTS[spec].items()
            }
        else:
            raise SystemExit(f'unknown variant {spec!r}: {sorted(NAMED_VARIANTS)} or label:k=v,...')
        variants.append((label, settings))
    return variants


def variant_config(base: EngineConfig, settings: dict[str, Any], dit_steps: int) -> EngineConfig:
    """``base`` with a variant's settings (the step cache by mode name, or ``dynamic-min``)."""
    options = {key: settings[key] for key in VARIANT_KEYS if key in settings}
    step_cache = StepCacheConfig(dit_steps=dit_steps)
    if options.get('step_cache') == 'dynamic-min':
        options['step_cache'], step_cache = 'dynamic', DYNAMIC_MIN
    return base.replace(
        sampling=dataclasses.replace(base.sampling, step_cache_tuning=step_cache),
        options=dataclasses.replace(base.options, **options),
    )
