# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The embodiment of a checkpoint from its experiment_cfg (conf.yaml + metadata.json)."""

import dataclasses
import json

from embodiment_support import DROID_FILE, droid_embodiment, ur_embodiment, yam_embodiment
import pytest
import yaml

from dreamzero_ros.engine.checkpoint.experiment_cfg import (
    KNOWN_PROMPT_TEMPLATES,
    embodiment_from_checkpoint,
    write_experiment_cfg,
)
from dreamzero_ros.engine.checkpoint.synthetic_droid import droid_metadata
from dreamzero_ros.errors import EmbodimentError

# The oxe_droid parts of a DROID training run's conf.yaml as OmegaConf.save(resolve=True) writes
# them: the base data config's anchors merged, interpolations resolved, run overrides applied.
_VIDEO = '[video.exterior_image_1_left, video.exterior_image_2_left, video.wrist_image_left]'
UPSTREAM_DROID_CONF = f"""
num_frames: 33
action_horizon: 24
image_resolution_width: 320
image_resolution_height: 176
train_architecture: lora
save_lora_only: true
relative_action: true
relative_action_per_horizon: false
relative_action_keys:
- joint_position
max_state_dim: 64
modality_configs:
  oxe_droid:
    video:
      _target_: groot.vla.data.dataset.ModalityConfig
      delta_indices: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]
      eval_delta_indices: [0]
      modality_keys: {_VIDEO}
    state:
      _target_: groot.vla.data.dataset.ModalityConfig
      delta_indices: [0]
      modality_keys: [state.joint_position, state.gripper_position]
    action:
      _target_: groot.vla.data.dataset.ModalityConfig
      delta_indices: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]
      modality_keys: [action.joint_position, action.gripper_position]
    language:
      _target_: groot.vla.data.dataset.ModalityConfig
      delta_indices: [0]
      modality_keys:
      - annotation.language.language_instruction
      - annotation.language.language_instruction_2
      - annotation.language.language_instruction_3
    lapa_action:
      _target_: groot.vla.data.dataset.ModalityConfig
      delta_indices: [0]
      modality_keys: [lapa_action]
  agibot:
    video:
      modality_keys: [video.top_head, video.hand_left, video.hand_right]
transforms:
  oxe_droid:
    _target_: groot.vla.data.transform.ComposedModalityTransform
    transforms:
    - {{_target_: groot.vla.data.transform.VideoToTensor, apply_to: {_VIDEO}}}
    - _target_: groot.vla.data.transform.VideoCrop
      apply_to: {_VIDEO}
      scale: 0.95
      mode: random
    - _target_: groot.vla.data.transform.VideoResize
      apply_to: {_VIDEO}
      height: 176
      width: 320
      interpolation: linear
    - _target_: groot.vla.data.transform.VideoColorJitter
      apply_to: {_VIDEO}
      brightness: 0.3
      contrast: 0.4
      saturation: 0.5
      hue: 0.08
    - {{_target_: groot.vla.data.transform.VideoToNumpy, apply_to: {_VIDEO}}}
    - _target_: groot.vla.data.transform.StateActionToTensor
      apply_to: [state.joint_position, state.gripper_position]
    - _target_: groot.vla.data.transform.StateActionTransform
      apply_to: [state.joint_position, state.gripper_position]
      normalization_modes: {{state.joint_position: q99, state.gripper_position: q99}}
    - _target_: groot.vla.data.transform.StateActionToTensor
      apply_to: [action.joint_position, action.gripper_position]
    - _target_: groot.vla.data.transform.StateActionTransform
      apply_to: [action.joint_position, action.gripper_position]
      normalization_modes: {{action.joint_position: q99, action.gripper_position: q99}}
    - _target_: groot.vla.data.transform.ConcatTransform
      video_concat_order: {_VIDEO}
      state_concat_order: [state.joint_position, state.gripper_position]
      action_concat_order: [action.joint_position, action.gripper_position]
    - _target_: groot.vla.model.dreamzero.transform.dreamzero_cotrain.DreamTransform
      default_instruction: Perform the default behavior.
      language_dropout_prob: 0.0
      always_use_default_instruction: false
      max_state_dim: 64
      max_action_dim: 32
      max_length: 512
      state_horizon: 1
      action_horizon: 24
      embodiment_tag_mapping: {{oxe_droid: 17, agibot: 26}}
      tokenizer_path: /mnt/data/checkpoints/umt5-xxl
metadata_versions: {{oxe_droid: '0221', agibot: '0221', yam: '0221'}}
fps: {{yam: 30}}
"""


def _checkpoint(tmp_path, conf, metadata):
    experiment = tmp_path / 'experiment_cfg'
    experiment.mkdir(parents=True, exist_ok=True)
    (experiment / 'conf.yaml').write_text(conf if isinstance(conf, str) else yaml.safe_dump(conf))
    (experiment / 'metadata.json').write_text(json.dumps(metadata))
    return tmp_path


def test_upstream_droid_training_config_gives_the_droid_embodiment(tmp_path):
    folder = _checkpoint(tmp_path, UPSTREAM_DROID_CONF, droid_metadata())
    assert embodiment_from_checkpoint(folder) == droid_embodiment()


@pytest.mark.parametrize('make', [droid_embodiment, yam_embodiment, ur_embodiment])
def test_written_experiment_cfg_reads_back_the_same_embodiment(tmp_path, make):
    embodiment = make()
    write_experiment_cfg(tmp_path, embodiment)
    known = embodiment.tag in KNOWN_PROMPT_TEMPLATES
    template = None if known else embodiment.prompt_template
    assert embodiment_from_checkpoint(tmp_path, prompt_template=template) == embodiment


def test_unknown_tag_needs_the_runs_prompt_template(tmp_path):
    write_experiment_cfg(tmp_path, ur_embodiment())
    with pytest.raises(
        EmbodimentError, match="no prompt template is known for embodiment 'ur5e_lab'"
    ):
        embodiment_from_checkpoint(tmp_path)


def test_order_comes_from_the_concat_transform(tmp_path):
    conf = yaml.safe_load(UPSTREAM_DROID_CONF)
    video = conf['modality_configs']['oxe_droid']['video']
    video['modality_keys'] = list(reversed(video['modality_keys']))
    embodiment = embodiment_from_checkpoint(_checkpoint(tmp_path, conf, droid_metadata()))
    assert embodiment.camera_keys == droid_embodiment().camera_keys
    conf['transforms']['oxe_droid']['transforms'][9]['video_concat_order'].pop()
    _checkpoint(tmp_path, conf, droid_metadata())
    with pytest.raises(EmbodimentError, match='ConcatTransform video order'):
        embodiment_from_checkpoint(tmp_path)


def test_checkpoint_without_experiment_cfg_is_refused_with_what_to_supply(tmp_path):
    (tmp_path / 'config.json').write_text('{}')
    with pytest.raises(EmbodimentError) as error:
        embodiment_from_checkpoint(tmp_path)
    message = str(error.value)
    assert 'has no experiment_cfg/conf.yaml or metadata.json' in message
    assert 'supply an embodiment file' in message
    with pytest.raises(EmbodimentError, match='no statistics'):
        embodiment_from_checkpoint(tmp_path, embodiment_file=DROID_FILE)
    embodiment_file = tmp_path / 'robot.yaml'
    embodiment_file.write_text(yaml.safe_dump(droid_embodiment().to_mapping()))
    assert embodiment_from_checkpoint(tmp_path, embodiment_file=embodiment_file) == (
        droid_embodiment()
    )


def test_embodiment_file_takes_statistics_from_the_checkpoint_metadata(tmp_path):
    experiment = tmp_path / 'experiment_cfg'
    experiment.mkdir()
    (experiment / 'metadata.json').write_text(json.dumps(droid_metadata()))
    assert embodiment_from_checkpoint(tmp_path, embodiment_file=DROID_FILE) == droid_embodiment()
    with pytest.raises(EmbodimentError, match="describes tag 'oxe_droid', not 'yam'"):
        embodiment_from_checkpoint(tmp_path, tag='yam', embodiment_file=DROID_FILE)


def test_several_embodiments_need_a_tag(tmp_path):
    write_experiment_cfg(tmp_path, [droid_embodiment(), yam_embodiment()])
    with pytest.raises(EmbodimentError, match=r"holds 2 embodiments \['oxe_droid', 'yam'\]"):
        embodiment_from_checkpoint(tmp_path)
    assert embodiment_from_checkpoint(tmp_path, tag='yam') == yam_embodiment()
    with pytest.raises(EmbodimentError, match=r"no embodiment 'agibot' \(it has"):
        embodiment_from_checkpoint(tmp_path, tag='agibot')


def _edit_conf(tmp_path, edit):
    write_experiment_cfg(tmp_path, droid_embodiment())
    path = tmp_path / 'experiment_cfg' / 'conf.yaml'
    conf = yaml.safe_load(path.read_text())
    edit(conf)
    path.write_text(yaml.safe_dump(conf))


@pytest.mark.parametrize(
    ('edit', 'message'),
    [
        (
            lambda c: c['transforms']['oxe_droid']['transforms'].insert(
                0, {'_target_': 'groot.vla.data.transform.StateActionSinCosTransform'}
            ),
            "is 'groot.vla.data.transform.StateActionSinCosTransform', which this engine does not",
        ),
        (
            lambda c: c['transforms']['oxe_droid']['transforms'][6].update(
                target_rotations={'state.joint_position': 'rotation_6d'}
            ),
            'rotation conversions',
        ),
        (lambda c: c.update(relative_action_per_horizon=True), 'per-horizon'),
        (
            lambda c: c['modality_configs']['oxe_droid']['state'].update(modality_keys=['joint']),
            "state key 'joint' does not start with 'state.'",
        ),
        (lambda c: c['modality_configs'].pop('oxe_droid'), 'oxe_droid is missing'),
    ],
)
def test_training_configs_this_engine_cannot_serve_are_refused(tmp_path, edit, message):
    _edit_conf(tmp_path, edit)
    with pytest.raises(EmbodimentError, match=message):
        embodiment_from_checkpoint(tmp_path)


def test_more_than_three_cameras_are_refused(tmp_path):
    embodiment = yam_embodiment()
    write_experiment_cfg(tmp_path, embodiment)
    path = tmp_path / 'experiment_cfg'
    conf = yaml.safe_load((path / 'conf.yaml').read_text())
    metadata = json.loads((path / 'metadata.json').read_text())
    conf['modality_configs']['yam']['video']['modality_keys'].append('video.belly')
    conf['transforms']['yam']['transforms'][9]['video_concat_order'].append('video.belly')
    metadata['yam']['modalities']['video']['belly'] = {'resolution': [320, 180], 'fps': 30.0}
    _checkpoint(tmp_path, conf, metadata)
    with pytest.raises(EmbodimentError, match='4 cameras: upstream stitches at most three'):
        embodiment_from_checkpoint(tmp_path)


def test_relative_keys_and_normalisation_come_from_the_run(tmp_path):
    def edit(conf):
        conf['relative_action'] = False
        del conf['transforms']['oxe_droid']['transforms'][8]['normalization_modes'][
            'action.gripper_position'
        ]

    _edit_conf(tmp_path, edit)
    embodiment = embodiment_from_checkpoint(tmp_path)
    assert [key.relative for key in embodiment.action] == [False, False]
    assert embodiment.action[1].normalization == 'none'


def test_control_rate_falls_back_to_the_camera_rate(tmp_path):
    _edit_conf(tmp_path, lambda conf: conf.pop('fps'))
    assert embodiment_from_checkpoint(tmp_path).control_hz == 15.0
    slow = dataclasses.replace(droid_embodiment(), control_hz=5.0)
    write_experiment_cfg(tmp_path, slow)
    assert embodiment_from_checkpoint(tmp_path).control_hz == 5.0
