# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The gripper command: DROID's 1 = closed convention, position range, hysteresis."""

import pytest

from dreamzero_ros.core.robot.gripper import GripperCommander, GripperConfig


def test_policy_one_is_closed_on_a_franka_hand():
    config = GripperConfig(open_position=0.04, closed_position=0.0)
    assert config.position(1.0) == 0.0
    assert config.position(0.0) == 0.04
    assert config.position(0.25) == pytest.approx(0.03)
    assert config.position(7.0) == 0.0 and config.position(-1.0) == 0.04


def test_binary_gripper_switches_with_hysteresis():
    commander = GripperCommander(GripperConfig())
    assert commander.update(0.1) == 0.04  # first value: open
    assert commander.update(0.55) is None  # inside the band: no chatter
    assert commander.update(0.45) is None
    assert commander.update(0.7) == 0.0  # closes
    assert commander.update(0.45) is None  # stays closed inside the band
    assert commander.update(0.3) == 0.04  # opens again
    assert commander.last_sent == 0.0


def test_a_first_value_inside_the_band_picks_the_nearer_side():
    commander = GripperCommander(GripperConfig())
    assert commander.update(0.55) == 0.0
    commander.reset()
    assert commander.update(0.45) == 0.04


def test_continuous_gripper_is_sent_when_the_target_moves_enough():
    commander = GripperCommander(GripperConfig(binary=False, min_change=0.1))
    assert commander.update(0.5) == pytest.approx(0.02)
    assert commander.update(0.55) is None
    assert commander.update(0.75) == pytest.approx(0.01)


@pytest.mark.parametrize(
    'kwargs',
    [
        {'open_position': 0.0, 'closed_position': 0.0},
        {'open_below': 0.6, 'close_above': 0.4},
        {'min_change': 0.0},
    ],
)
def test_bad_configurations_are_refused(kwargs):
    with pytest.raises(ValueError):
        GripperConfig(**kwargs)
