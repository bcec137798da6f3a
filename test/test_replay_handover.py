# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Hand-over quality in replay: velocity and acceleration steps where chunks meet."""

import numpy as np
import pytest

from dreamzero_ros.core.control.control_loop import LoopConfig
from dreamzero_ros.core.motion.chunk_scheduler import BlendConfig
from dreamzero_ros.core.motion.safety import SafetyLimits
from dreamzero_ros.replay.handover import (
    ChunkArrival,
    boundary_steps,
    command_plans,
    handover_quality,
)

DT = 1 / 15
LOOP = LoopConfig(
    SafetyLimits(np.full(8, -3.0), np.full(8, 3.0), np.full(8, 0.2)), BlendConfig(2, 12)
)


def motion(t):
    t = np.atleast_1d(t)
    return np.stack([0.3 * np.sin(1.5 * t + j) for j in range(7)] + [0 * t], axis=1)


def records(offset=0.05):
    out = []
    for k in range(6):
        stamp = 1.0 + 0.5 * k
        actions = motion(stamp + DT * np.arange(24)) + offset * (k % 2)  # chunks disagree
        out.append(ChunkArrival(stamp, stamp, 0.2, DT, actions, motion(stamp)[0]))
    return out


def test_a_velocity_jump_is_measured():
    def kinked(times):
        return np.maximum(times, 1.0)[:, None] - 1.0  # velocity 0 then 1 at t = 1

    steps = boundary_steps(np.array([1.0]), kinked, 0.01)
    assert steps['velocity_step_max'] == pytest.approx(1.0)
    assert boundary_steps(np.array([]), kinked, 0.01)['velocity_step_max'] is None


def test_the_command_hands_over_without_a_velocity_step():
    plans = command_plans(records(), LOOP)
    assert len(plans) == 6
    for old, new in zip(plans, plans[1:], strict=False):
        t = new.start_time
        np.testing.assert_allclose(new.position_at(t), old.position_at(t), atol=1e-9)
        np.testing.assert_allclose(new.velocity_at(t)[:7], old.velocity_at(t)[:7], atol=1e-9)


def test_chunks_that_agree_hand_over_as_smoothly_as_the_recorded_motion():
    quality = handover_quality(records(offset=0.0), motion, LOOP)
    assert quality['hand_overs'] == 5 and quality['step_s'] == DT
    command, recorded = quality['command'], quality['recorded']
    assert recorded['velocity_step_max'] > 0
    assert command['velocity_step_max'] < 2 * recorded['velocity_step_max']
    # chunks 0.05 rad apart are blended in over the window: a larger, finite step
    disagreeing = handover_quality(records(offset=0.05), motion, LOOP)['command']
    assert command['velocity_step_max'] < disagreeing['velocity_step_max'] < 0.05 / DT


def test_accelerations_jumps_and_jerk_are_reported_against_the_limits():
    from dreamzero_ros.core.config.node_config import build_settings

    panda = build_settings({'engine.checkpoint': 'c'}).loop  # Panda acceleration, jerk limits
    disagreeing = records(offset=0.3)
    unlimited = handover_quality(disagreeing, motion, LOOP)['accelerations']
    assert unlimited['limit'] is None and unlimited['ratio_max'] is None
    assert unlimited['jerk_limit'] is None and unlimited['jerk_ratio_max'] is None
    # without acceleration limits the command needs more than the Panda allows
    assert max(unlimited['max']) > max(panda.motion.max_acceleration)
    figures = handover_quality(disagreeing, motion, panda)['accelerations']
    assert figures['segment']['count'] > 0 and len(figures['max']) == 7
    assert figures['limit'] == list(panda.motion.max_acceleration)
    assert 0 < figures['ratio_max'] <= 1 + 1e-6
    assert figures['segment']['max'] < unlimited['segment']['max']
    # every hand-over continuous in acceleration; the 1 kHz jerk within the limits
    assert len(figures['jump']['max']) == 7 and max(figures['jump']['max']) < 1e-6
    assert figures['jerk_limit'] == list(panda.motion.max_jerk)
    assert 0 < figures['jerk_ratio_max'] <= 1 + 1e-6
    assert figures['violations'] == {}
    assert max(unlimited['jerk']['max']) > max(figures['jerk']['max'])


def test_the_report_shows_the_jumps_and_the_jerk_beside_the_limits():
    from dreamzero_ros.core.config.node_config import build_settings
    from dreamzero_ros.replay.report import hand_over_rows

    panda = build_settings({'engine.checkpoint': 'c'}).loop
    rows = dict(hand_over_rows(handover_quality(records(offset=0.3), motion, panda)))
    jump = rows['hand-over acceleration jump p50 / p95 / max (rad/s^2), largest joint']
    jerk = next(value for key, value in rows.items() if key.startswith('1 kHz command jerk'))
    assert '(joint' in jump and '(joint' in jerk
    assert float(jerk.split('; ')[1]) <= 1.0 + 1e-6
    assert rows['Franka checks of the 1 kHz command: samples over a limit'] == 'none'
