# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""What would poison training is refused in one line, per episode, and nothing is half-written.

Each bag is written with the project's BagWriter with one fault: camera frames missing for
longer than the gap limit, a camera topic absent, a NaN joint, a joint beyond the Panda's
limits, the joint-state clock jumping, a damaged file. The export drops that episode with its
reason, keeps the good ones of the other bags, and writes no dataset when none is left.
"""

import json

from export_support import droid_clips_state, read_meta, write_bag
import numpy as np
import pytest

from dreamzero_ros.export.cli import main


def _export(capsys, *argv):
    status = main([*map(str, argv), '--no-progress', '--min-frames', '5', '--task', 'stack'])
    captured = capsys.readouterr()
    return status, captured.err, captured.out


def _with(joint, value, start, stop):
    def joints(t):
        values = droid_clips_state(t)
        if start <= t < stop:
            values[joint] = value
        return values

    return joints


FAULTS = {
    'gap': (dict(drop_frames=(1.0, 1.6)), "skewed: camera 'exterior_image_1_left' and joint"),
    'nan': (
        dict(joints=_with(2, float('nan'), 1.0, 1.1)),
        "bad_joints: joint 'panda_joint3' is nan",
    ),
    'limits': (
        dict(joints=_with(3, -0.01, 1.0, 1.2)),
        "joint_limits: state joint 'panda_joint4' is -0.0100, outside [-3.0718, -0.0698]",
    ),
    'clock': (
        dict(stamp_shift=(1.5, -1.2)),
        'clock_jump: /joint_states stamp moved -1.200 s against its log time at 1.500 s',
    ),
    'camera': (
        dict(cameras=('exterior_image_1_left', 'exterior_image_2_left')),
        "unusable bag: camera 'wrist_image_left' topic '/wrist_image_left' is not in bag",
    ),
}


@pytest.mark.parametrize('fault', sorted(FAULTS))
def test_a_faulty_episode_is_dropped_in_one_line_and_nothing_is_written(tmp_path, capsys, fault):
    changes, reason = FAULTS[fault]
    bag = write_bag(tmp_path / 'bag', 3.0, **changes)
    out = tmp_path / 'ds'
    status, err, _ = _export(capsys, bag, '-o', out)
    assert status == 1, err
    dropped = [line for line in err.splitlines() if line.startswith('dreamzero-export: dropped')]
    assert len(dropped) == 1 and reason in dropped[0], err
    assert not out.exists() and not list(tmp_path.glob('.ds.partial-*'))


def test_good_bags_are_kept_and_the_summary_lists_what_was_dropped(tmp_path, capsys):
    good = write_bag(tmp_path / 'good', 2.0)
    gap = write_bag(tmp_path / 'gap', 2.0, drop_frames=(0.8, 1.5))
    damaged = write_bag(tmp_path / 'damaged', 2.0)
    (mcap,) = damaged.glob('*.mcap')
    data = bytearray(mcap.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte inside a chunk: its CRC no longer matches
    mcap.write_bytes(bytes(data))
    out = tmp_path / 'ds'
    status, err, stdout = _export(capsys, good, gap, damaged, '-o', out)
    assert status == 0, err
    summary = json.loads(stdout)
    assert summary['episodes_written'] == 1 and summary['dataset']['episodes'] == 1
    assert [line.split(' ')[1] for line in summary['dropped']] == ['gap', 'damaged']
    assert 'corrupt' in summary['dropped'][1] or 'CRC' in summary['dropped'][1]
    assert read_meta(out)['episodes'][0]['recording']['bag'] == 'good'
    # the refused episodes left no file behind
    assert len(list(out.rglob('*.mp4'))) == 3 and len(list(out.rglob('*.parquet'))) == 1
    assert not (out / '.staging').exists()


def test_a_short_gap_within_the_limit_is_kept_and_a_larger_limit_accepts_a_longer_one(
    tmp_path, capsys
):
    bag = write_bag(tmp_path / 'bag', 3.0, drop_frames=(1.0, 1.1))
    assert _export(capsys, bag, '-o', tmp_path / 'a')[0] == 0
    longer = write_bag(tmp_path / 'longer', 3.0, drop_frames=(1.0, 1.6))
    assert _export(capsys, longer, '-o', tmp_path / 'b', '--max-gap', '0.5')[0] == 1
    assert _export(capsys, longer, '-o', tmp_path / 'c', '--max-gap', '1.0')[0] == 0


def test_the_limit_margin_lets_a_joint_just_past_its_limit_through(tmp_path, capsys):
    bag = write_bag(tmp_path / 'bag', 3.0, joints=_with(3, -0.0690, 1.0, 1.2))
    assert _export(capsys, bag, '-o', tmp_path / 'strict')[0] == 1
    assert _export(capsys, bag, '-o', tmp_path / 'margin', '--limit-margin', '0.001')[0] == 0
    frame = np.stack(
        __import__('pandas').read_parquet(next((tmp_path / 'margin').rglob('*.parquet')))[
            'observation.state'
        ]
    )
    assert frame[:, 7 + 3].max() == pytest.approx(-0.0690)
