# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Which of the scheduler steps run the DiT; the others reuse the last prediction.

Upstream DreamZero takes 16 UniPC steps per chunk but by default runs the DiT on only 8 of them
(``NUM_DIT_STEPS=8``): steps 0, 1, 2, 6, 10, 13, 14 and 15.  A skipped step feeds the scheduler
the last CFG-combined video velocity and the last conditional action velocity again.

Modes (the ``step_cache`` option); :class:`StepCacheConfig` tunes them:

* ``'full'``: the DiT on every step (the reference);
* ``'static'``: upstream's fixed masks for 5, 6, 7 or 8 DiT steps out of 16 (8 by default);
* ``'dynamic'``: upstream's ``DYNAMIC_CACHE_SCHEDULE``: always run the first two steps, then compare
  the last two computed video velocities by cosine similarity (flattened per sample, averaged over
  the batch); above ``thresholds[k]`` (tested in order) skip the next ``countdowns[k]`` steps, then
  run one step unconditionally before testing again.  A threshold of 1.0 or more never skips.

The dynamic decision reads one scalar from the device per computed step (a host sync); the static
and full schedules need none.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dreamzero_ros.engine.option_names import STEP_CACHE_MODES
from dreamzero_ros.errors import ConfigError

__all__ = ['STATIC_DIT_STEP_MASKS', 'StepCacheConfig', 'StepSchedule']

_T, _F = True, False

#: Upstream's static masks over 16 scheduler steps, by number of DiT steps.
STATIC_DIT_STEP_MASKS: dict[int, tuple[bool, ...]] = {
    5: (_T, _T, _T, _F, _F, _F, _F, _T, _F, _F, _F, _F, _T, _F, _F, _F),
    6: (_T, _T, _F, _F, _F, _T, _F, _F, _F, _F, _T, _F, _F, _F, _T, _T),
    7: (_T, _T, _T, _F, _F, _F, _T, _F, _F, _F, _T, _F, _F, _F, _T, _T),
    8: (_T, _T, _T, _F, _F, _F, _T, _F, _F, _F, _T, _F, _F, _T, _T, _T),
}


@dataclass(frozen=True)
class StepCacheConfig:
    """How the modes skip: ``dit_steps`` of the static mask; the dynamic mode's tests.

    Upstream's values by default; the mode is the ``step_cache`` option.
    """

    dit_steps: int = 8
    thresholds: tuple[float, ...] = (0.95, 0.93)
    countdowns: tuple[int, ...] = (4, 2)

    def __post_init__(self) -> None:
        if len(self.thresholds) != len(self.countdowns) or any(c < 1 for c in self.countdowns):
            raise ConfigError('step cache thresholds and countdowns must pair up, countdowns >= 1')

    def check(self, mode: str, num_steps: int) -> None:
        """Raise ConfigError unless ``mode`` can schedule ``num_steps`` steps this way."""
        if mode not in STEP_CACHE_MODES:
            raise ConfigError(f'step cache mode must be one of {STEP_CACHE_MODES}, got {mode!r}')
        if mode != 'static':
            return
        mask = STATIC_DIT_STEP_MASKS.get(self.dit_steps)
        if mask is None:
            raise ConfigError(
                f'static step cache supports {sorted(STATIC_DIT_STEP_MASKS)} DiT steps, '
                f'got {self.dit_steps}'
            )
        if len(mask) != num_steps:
            raise ConfigError(f'the static step cache is defined for 16 steps, not {num_steps}')


class StepSchedule:
    """Per-chunk decisions; call :meth:`should_run` for each step index, in order.

    After a step that runs the DiT, pass its CFG-combined video velocity to :meth:`record`.
    """

    def __init__(self, mode: str, config: StepCacheConfig, num_steps: int) -> None:
        config.check(mode, num_steps)
        self.mode = mode
        self.config = config
        self.num_steps = num_steps
        self._history: list[torch.Tensor] = []
        self._countdown = 0
        #: Cosine similarities the dynamic mode compared, in order (for diagnostics).
        self.similarities: list[float] = []

    def should_run(self, index: int) -> bool:
        """Whether step ``index`` runs the DiT."""
        if self.mode == 'full':
            return True
        if self.mode == 'static':
            return STATIC_DIT_STEP_MASKS[self.config.dit_steps][index]
        if len(self._history) < 2:
            return True
        if self._countdown > 1:
            self._countdown -= 1
            return False
        if self._countdown == 1:
            self._countdown = 0
            return True
        last = self._history[-1].flatten(1).float()
        previous = self._history[-2].flatten(1).float()
        similarity = float(torch.nn.functional.cosine_similarity(last, previous, dim=1).mean())
        self.similarities.append(similarity)
        for threshold, countdown in zip(
            self.config.thresholds, self.config.countdowns, strict=True
        ):
            if similarity > threshold:
                self._countdown = countdown
                return False
        return True

    def is_last_dit_step(self, index: int) -> bool:
        """Whether step ``index`` (one that runs the DiT) is certainly the chunk's last DiT step.

        Full and static schedules know it in advance.  The dynamic one knows it only on the
        final step: any earlier DiT step may be followed by a similarity test, which needs this
        step's CFG-combined velocity.
        """
        if self.mode == 'static':
            mask = STATIC_DIT_STEP_MASKS[self.config.dit_steps]
            return not any(mask[index + 1 :])
        return index == self.num_steps - 1

    def record(self, video_velocity: torch.Tensor) -> None:
        """Remember a computed video velocity (the dynamic mode compares the last two)."""
        if self.mode == 'dynamic':
            self._history = [*self._history[-1:], video_velocity]
