# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Embodiment descriptions: the file schema, validation, prompts, normalisation, stitching."""

import dataclasses

from embodiment_support import DROID_FILE, droid_embodiment, ur_embodiment, yam_embodiment
import numpy as np
import pytest
import torch
import yaml

from dreamzero_ros.engine.checkpoint.experiment_cfg import load_embodiment_file
from dreamzero_ros.engine.checkpoint.synthetic_droid import droid_metadata
from dreamzero_ros.engine.embodiment import Embodiment, EmbodimentError, KeyStatistics
from dreamzero_ros.engine.pipeline.normalization import denormalize, normalize
from dreamzero_ros.engine.pipeline.stitching import stitch

_DROID_VIEWS = (
    " The video is split into three views: The top view shows the camera view from the robot's "
    'wrist, the bottom-left view shows the camera view from the left exterior camera, and the '
    'bottom-right view shows the camera view from the right exterior camera. During training, one '
    'of the two bottom exterior views may be a black screen (dropped view). The robot '
)


def test_droid_file_describes_todays_droid_inputs():
    droid = droid_embodiment()
    assert droid.tag == 'oxe_droid'
    assert droid.camera_keys == (
        'exterior_image_1_left',
        'exterior_image_2_left',
        'wrist_image_left',
    )
    assert all(camera.source_size == (180, 320) for camera in droid.cameras)
    assert (droid.view_size, droid.crop_scale, droid.layout) == ((176, 320), 0.95, 'droid')
    assert droid.stitched_size == (352, 640)
    assert [(k.key, k.dim, k.relative) for k in droid.action] == [
        ('joint_position', 7, True),
        ('gripper_position', 1, False),
    ]
    assert (droid.state_dim, droid.action_dim) == (8, 8)
    assert droid.gripper_columns == (7,) and droid.arm_columns == tuple(range(7))
    assert droid.control_hz == 15.0
    for instruction, text in (
        ('Pick up the RED cup', 'pick up the red cup'),
        ("['put the fork away', 'other']", 'put the fork away'),
        ('42', '42'),
    ):
        expected = 'A multi-view video shows that a robot ' + text + _DROID_VIEWS + text
        assert droid.prompt(instruction) == expected


def test_droid_statistics_normalise_exactly_as_the_q99_quantiles():
    stats = droid_metadata()['oxe_droid']['statistics']['state']['joint_position']
    key = droid_embodiment().state[0]
    q01, q99 = key.statistics.values['q01'], key.statistics.values['q99']
    values = np.linspace(-4, 4, 7)
    expected = np.clip(2.0 * (values - q01) / (q99 - q01) - 1, -1.0, 1.0)
    np.testing.assert_array_equal(normalize(key.statistics, values, 'q99'), expected)
    np.testing.assert_allclose(key.statistics.values['q01'], np.float32(stats['q01']))


def test_file_round_trip_keeps_every_field(tmp_path):
    for embodiment in (droid_embodiment(), ur_embodiment(), yam_embodiment()):
        path = tmp_path / f'{embodiment.tag}.yaml'
        path.write_text(yaml.safe_dump(embodiment.to_mapping()))
        loaded = load_embodiment_file(path)
        assert loaded.to_mapping() == embodiment.to_mapping()
        assert loaded.camera_keys == embodiment.camera_keys


def test_file_without_statistics_takes_them_from_metadata(tmp_path):
    data = yaml.safe_load(DROID_FILE.read_text())
    with pytest.raises(EmbodimentError, match='no statistics'):
        Embodiment.from_mapping(data)
    stats = droid_metadata()['oxe_droid']['statistics']
    assert Embodiment.from_mapping(data, statistics=stats) == droid_embodiment()


@pytest.mark.parametrize(
    ('change', 'message'),
    [
        (lambda d: d.update(colour='red'), r'unknown key .*\.colour'),
        (lambda d: d.pop('action'), r"lacks \['action'\]"),
        (lambda d: d['view'].update(layout='mosaic'), "layout 'mosaic' is not one of"),
        (lambda d: d['cameras'].pop(), "layout 'droid' takes 3..3 cameras, got 2"),
        (lambda d: d['cameras'][1].update(key='exterior_image_1_left'), 'duplicated camera key'),
        (lambda d: d['cameras'][0].update(height=0), 'positive'),
        (lambda d: d['view'].update(crop_scale=1.5), 'crop_scale must be in'),
        (lambda d: d.update(prompt_template='do it'), r'must contain \{instruction\}'),
        (
            lambda d: d['action'][0].update(dim=6),
            r'statistics\.action\.joint_position\.min has shape \(7,\), the key is 6 wide',
        ),
        (lambda d: d['state'].pop(0), "relative action key 'joint_position' needs a state key"),
        (lambda d: d['action'][1].update(normalization='scale'), "normalization 'scale' is not"),
        (lambda d: d['action'][1].update(normalization='mean_std', dim='1'), 'must be an integer'),
        (lambda d: d['state'][0].update(relative=True), 'only action keys can be relative'),
        (lambda d: d.update(control_hz=0), 'control_hz must be positive'),
        (lambda d: d.update(control_hz=1e6), 'control_hz must be positive and at most 1000'),
        (lambda d: d['cameras'][0].update(height=10**12), 'is beyond 8192 pixels a side'),
        (lambda d: d['cameras'][2].update(width=200_000), 'is beyond 8192 pixels a side'),
        (lambda d: d['view'].update(height=100_000), r'view size \(100000, 320\) is beyond'),
        (lambda d: d['action'][0].update(dim=10**9), r'action\[0\]\.dim must be 1 to 64'),
        (
            lambda d: d['state'].extend(
                {'key': f's{i}', 'dim': 1, 'normalization': 'none'} for i in range(70)
            ),
            '72 state keys, more than 64',
        ),
    ],
)
def test_malformed_files_are_refused_naming_the_field(change, message):
    data = droid_embodiment().to_mapping()
    change(data)
    with pytest.raises(EmbodimentError, match=message):
        Embodiment.from_mapping(data)


def test_missing_statistic_for_a_mode_is_refused():
    data = droid_embodiment().to_mapping()
    data['action'][1]['normalization'] = 'min_max'
    del data['statistics']['action']['gripper_position']['min']
    with pytest.raises(
        EmbodimentError, match=r"normalised with min_max but its statistics lack \['min'\]"
    ):
        Embodiment.from_mapping(data)


def test_missing_or_bad_files_name_the_path(tmp_path):
    with pytest.raises(EmbodimentError, match='missing file'):
        load_embodiment_file(tmp_path / 'none.yaml')
    bad = tmp_path / 'bad.yaml'
    bad.write_text('tag: [unclosed\n')
    with pytest.raises(EmbodimentError, match=f'{bad} is not valid YAML'):
        load_embodiment_file(bad)
    deep = tmp_path / 'deep.yaml'
    deep.write_text('[' * 100_000)
    with pytest.raises(EmbodimentError, match=str(deep)):
        load_embodiment_file(deep)


def test_gripper_keys_default_to_their_names():
    data = ur_embodiment().to_mapping()
    for entry in data['action'] + data['state']:
        del entry['gripper']
    loaded = Embodiment.from_mapping(data)
    assert loaded.gripper_columns == (6,) and loaded.arm_columns == tuple(range(6))
    assert yam_embodiment().gripper_columns == (6, 13)


@pytest.mark.parametrize('mode', ['q99', 'min_max', 'mean_std', 'binary', 'none'])
def test_normalisation_modes_invert(mode):
    stats = KeyStatistics(
        {
            'q01': np.array([-1.0, 2.0, 5.0]),
            'q99': np.array([1.0, 4.0, 5.0]),
            'min': np.array([-2.0, 1.0, 5.0]),
            'max': np.array([2.0, 5.0, 5.0]),
            'mean': np.array([0.0, 3.0, 5.0]),
            'std': np.array([0.5, 1.0, 0.0]),
        }
    )
    raw = np.array([0.5, 3.5, 5.0])
    model = normalize(stats, raw, mode)
    expected = {
        'q99': [0.5, 0.5, 1.0],  # a constant dim keeps its value, clipped to [-1, 1]
        'min_max': [0.25, 0.25, 0.0],  # a constant dim becomes 0
        'mean_std': [1.0, 0.5, 5.0],  # zero std keeps the value, no clipping
        'binary': [0.0, 1.0, 1.0],
        'none': [0.5, 3.5, 5.0],
    }[mode]
    np.testing.assert_allclose(model, expected)
    back = denormalize(stats, model, mode)
    if mode in ('q99', 'min_max', 'mean_std', 'none'):
        np.testing.assert_allclose(back[:2], raw[:2])


def _views(count, height=4, width=6):
    return [
        torch.full((2, height, width, 3), 10 * (i + 1), dtype=torch.uint8) for i in range(count)
    ]


def test_droid_layout_puts_the_third_view_on_top_doubled():
    views = _views(3)
    views[2] = torch.arange(6, dtype=torch.uint8)[None, None, :, None].expand(2, 4, 6, 3)
    out = stitch(views, 'droid')
    assert out.shape == (2, 8, 12, 3)
    assert torch.equal(out[:, :4, 0::2], views[2]) and torch.equal(out[:, :4, 1::2], views[2])
    assert (out[:, 4:, :6] == 10).all() and (out[:, 4:, 6:] == 20).all()


def test_grid_layout_places_views_like_upstream():
    out = stitch(_views(3), 'grid')
    assert out.shape == (2, 8, 12, 3)
    assert (out[:, :4, :6] == 10).all() and (out[:, 4:, :6] == 20).all()
    assert (out[:, :4, 6:] == 30).all() and (out[:, 4:, 6:] == 0).all()
    two = stitch(_views(2), 'grid')
    assert (two[:, :4, 6:] == 0).all() and (two[:, 4:, :6] == 20).all()
    assert torch.equal(stitch(_views(1), 'single'), _views(1)[0])


def test_stitch_refuses_wrong_counts_and_sizes():
    with pytest.raises(ValueError, match='takes 2..3 views, got 4'):
        stitch(_views(4), 'grid')
    with pytest.raises(ValueError, match='share one shape'):
        stitch([*_views(1), *_views(1, height=5)], 'grid')


def test_tokens_per_frame_follow_view_size_and_layout():
    assert ur_embodiment().stitched_size == (32, 96)
    single = dataclasses.replace(ur_embodiment(layout='single', cameras=1), view_size=(32, 48))
    assert single.stitched_size == (32, 48)


@pytest.mark.parametrize(
    ('text', 'message'),
    [
        ('[' + '0, ' * 250_000 + '0]', 'holds more than 200000 nodes'),  # 750 kB of integers
        ('a: &x [1, 2, 3]\n' + ''.join(f'k{i}: *x\n' for i in range(250_000)), 'more than'),
        ('[' * 100 + ']' * 100, 'nests deeper than 64 levels'),
    ],
)
def test_yaml_beyond_the_node_and_depth_limits_is_refused_while_parsing(tmp_path, text, message):
    import time

    path = tmp_path / 'conf.yaml'
    path.write_text(text)
    start = time.perf_counter()
    with pytest.raises(EmbodimentError, match=message) as error:
        load_embodiment_file(path)
    assert str(path) in str(error.value)
    assert time.perf_counter() - start < 10  # the first 200000 nodes' events, nothing built


def test_configuration_files_beyond_the_size_limit_are_refused_before_reading(tmp_path):
    from dreamzero_ros.engine.checkpoint.data_files import read_json
    from dreamzero_ros.errors import CheckpointError

    for name in ('big.yaml', 'big.json'):
        path = tmp_path / name
        with open(path, 'wb') as file:  # sparse: 100 MB that is never read
            file.truncate(100 << 20)
        with pytest.raises((EmbodimentError, CheckpointError), match='more than the 16777216'):
            if name.endswith('yaml'):
                load_embodiment_file(path)
            else:
                read_json(path, CheckpointError)


def test_json_beyond_the_value_and_depth_limits_is_refused_naming_the_file(tmp_path):
    from dreamzero_ros.engine.checkpoint.data_files import read_json
    from dreamzero_ros.errors import CheckpointError

    cases = {
        'numbers.json': ('[' + '0,' * 250_000 + '0]', 'holds more than 200000 values'),
        'strings.json': ('[' + '"",' * 250_000 + '""]', 'holds more than 200000 values'),
        'deep.json': ('[' * 100 + ']' * 100, 'nests deeper than 64 levels'),
    }
    for name, (text, message) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(CheckpointError, match=message) as error:
            read_json(path, CheckpointError)
        assert str(path) in str(error.value)
    (tmp_path / 'fine.json').write_text('{"a": [1, 2.5, {"b": null}]}')
    assert read_json(tmp_path / 'fine.json', CheckpointError) == {'a': [1, 2.5, {'b': None}]}
