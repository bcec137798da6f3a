# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The Foxglove layout and the RViz config show the topics the node publishes."""

import json
from pathlib import Path

import yaml

from dreamzero_ros.core.observations.imagination import view_topics
from dreamzero_ros.engine.checkpoint.synthetic_droid import droid_embodiment
from dreamzero_ros.replay.live_replay import node_topic

REPO = Path(__file__).resolve().parents[1]
CAMERAS = droid_embodiment().camera_keys
VIEWS = [node_topic(topic) for topic in view_topics(CAMERAS, 'jpeg').values()]
PLAN = [node_topic(f'~/{name}') for name in ('plan_path', 'executed_path', 'envelope')]


def _strings(tree) -> set[str]:
    if isinstance(tree, dict):
        return {s for value in tree.values() for s in _strings(value)} | set(tree)
    if isinstance(tree, list):
        return {s for value in tree for s in _strings(value)}
    return {tree} if isinstance(tree, str) else set()


def test_foxglove_layout_shows_cameras_views_plan_and_diagnostics():
    layout = json.loads((REPO / 'docs' / 'foxglove_layout.json').read_text())
    strings = _strings(layout)
    cameras = [f'/{camera}' for camera in CAMERAS]
    assert set(VIEWS + PLAN + cameras + ['/diagnostics']) <= strings
    assert any(s.startswith('/joint_states.position') for s in strings)  # a plot path
    panels = set(layout['configById'])
    placed = {s for s in _strings(layout['layout']) if '!' in s}
    assert placed == panels  # every configured panel is in the layout, and only those


def test_rviz_config_shows_cameras_views_and_plan():
    config = yaml.safe_load((REPO / 'config' / 'dreamzero.rviz').read_text())
    displays = config['Visualization Manager']['Displays']
    topics = {d['Topic']['Value'] for d in displays if 'Topic' in d}
    assert set(VIEWS + PLAN + [f'/{camera}' for camera in CAMERAS]) <= topics
    assert {d['Class'] for d in displays} >= {
        'rviz_default_plugins/Image',
        'rviz_default_plugins/Path',
        'rviz_default_plugins/MarkerArray',
        'rviz_default_plugins/RobotModel',
    }
