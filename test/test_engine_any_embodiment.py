# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Checkpoints of robots other than DROID, LoRA fine-tunes and encoder files, through the engine."""

import dataclasses

from embodiment_support import (
    UR_TEMPLATE,
    statistics,
    ur_embodiment,
    ur_observation,
    write_ur_checkpoint,
    yam_embodiment,
)
from lora_support import read_tensors, write_lora_checkpoints, write_tensors
import numpy as np
import pytest
import torch
import yaml

from dreamzero_ros.engine import DreamZeroEngine, EngineConfig
from dreamzero_ros.engine.checkpoint.random_checkpoint import write_random_checkpoint
from dreamzero_ros.engine.checkpoint.synthetic_droid import random_observation
from dreamzero_ros.engine.loader import load_engine
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.errors import CheckpointError, EmbodimentError, ObservationError
from dreamzero_ros.policy_types import Observation


@pytest.fixture(scope='module')
def ur_checkpoint(tmp_path_factory):
    """6 joints + gripper, two cameras in a grid, absolute actions, 12 tokens per frame."""
    return write_ur_checkpoint(tmp_path_factory.mktemp('ur'))


def test_a_six_joint_two_camera_robot_runs_end_to_end(ur_checkpoint):
    engine = DreamZeroEngine.from_pretrained(
        ur_checkpoint, EngineOptions(device='cpu', dtype='float32', prompt_template=UR_TEMPLATE)
    )
    assert engine.embodiment == ur_embodiment()
    meta = engine.metadata
    assert meta['cameras'] == ['front', 'wrist'] and meta['embodiment'] == 'ur5e_lab'
    assert (meta['arm_dof'], meta['gripper_dof'], meta['action_dim']) == (6, 1, 7)
    assert meta['image_resolution'] == (24, 64) and meta['control_hz'] == 10.0
    first = engine.infer(ur_observation(0))
    second = engine.infer(ur_observation(1))
    for chunk in (first, second):
        assert chunk.actions.shape == (24, 7) and np.all(np.isfinite(chunk.actions))
        assert chunk.step_duration == pytest.approx(0.1)
    assert engine.last_stats['frames'] == 4  # the second call sees the last four frames
    # Any size of camera frame is letterboxed to the dataset resolution, as for DROID.
    big = {name: np.zeros((96, 256, 3), np.uint8) for name in ('front', 'wrist')}
    assert engine.infer(ur_observation(2, images=big, session_id='b')).actions.shape == (24, 7)


def test_observations_of_another_robot_are_refused(ur_checkpoint):
    engine = DreamZeroEngine.from_pretrained(
        ur_checkpoint, EngineOptions(device='cpu', dtype='float32', prompt_template=UR_TEMPLATE)
    )
    with pytest.raises(ObservationError, match="missing camera image 'front'"):
        engine.infer(random_observation(seed=0))
    with pytest.raises(ObservationError, match=r'joint_position: expected shape \(6,\)'):
        engine.infer(ur_observation(joint_position=np.zeros(7)))
    with pytest.raises(EmbodimentError, match="no prompt template is known for embodiment 'ur5e"):
        DreamZeroEngine.from_pretrained(ur_checkpoint, EngineOptions(device='cpu', dtype='float32'))


def test_a_bimanual_three_camera_robot_with_relative_actions(tmp_path):
    yam = dataclasses.replace(yam_embodiment(), view_size=(16, 32))  # 8 tokens: the tiny preset
    # The left arm's deltas span nothing (q01 == q99 == 0): its actions must be its state.
    still = dataclasses.replace(yam.action[0], statistics=statistics([0.0] * 6, [0.0] * 6))
    yam = dataclasses.replace(yam, action=(still, *yam.action[1:]))
    folder = write_random_checkpoint(tmp_path / 'yam', 'tiny', seed=2, embodiment=yam)
    engine = DreamZeroEngine.from_pretrained(folder, EngineOptions(device='cpu', dtype='float32'))
    rng = np.random.default_rng(0)
    observation = Observation(
        images={key: rng.integers(0, 255, (180, 320, 3), np.uint8) for key in yam.camera_keys},
        joint_position=rng.uniform(-1, 1, 12),
        gripper_position=np.array([0.2, 0.9]),
        prompt='fold the towel',
    )
    actions = engine.infer(observation).actions
    assert actions.shape == (24, 14) and engine.embodiment.gripper_columns == (6, 13)
    np.testing.assert_allclose(
        actions[:, 0:6], np.tile(observation.joint_position[0:6], (24, 1)), atol=1e-6
    )
    assert np.abs(actions[:, 7:13] - observation.joint_position[6:12]).max() > 1e-3


def test_a_single_camera_robot(tmp_path):
    single = dataclasses.replace(
        ur_embodiment(layout='single', cameras=1), view_size=(32, 64)
    )  # 32x64 frame: 8 tokens
    folder = write_random_checkpoint(tmp_path / 'one', 'tiny', embodiment=single)
    engine = DreamZeroEngine.from_pretrained(
        folder, EngineOptions(device='cpu', dtype='float32', prompt_template=UR_TEMPLATE)
    )
    observation = ur_observation(images={'front': np.zeros((24, 64, 3), np.uint8)})
    assert engine.infer(observation).actions.shape == (24, 7)


def test_an_embodiment_that_does_not_fit_the_model_is_refused(ur_checkpoint, tmp_path):
    droid_sized = dataclasses.replace(ur_embodiment(), view_size=(16, 32))
    path = tmp_path / 'robot.yaml'
    path.write_text(yaml.safe_dump(droid_sized.to_mapping()))
    with pytest.raises(EmbodimentError, match='give 8 tokens per latent frame.*frame_seqlen is 12'):
        DreamZeroEngine.from_pretrained(
            ur_checkpoint, EngineOptions(device='cpu', dtype='float32', embodiment_file=str(path))
        )


def test_a_checkpoint_without_experiment_cfg_needs_an_embodiment_file(ur_checkpoint, tmp_path):
    folder = tmp_path / 'base'
    folder.mkdir()
    for path in ur_checkpoint.rglob('*'):
        if path.is_file() and 'experiment_cfg' not in path.parts:
            target = folder / path.relative_to(ur_checkpoint)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    with pytest.raises(EmbodimentError, match='supply an embodiment file'):
        DreamZeroEngine.from_pretrained(folder, EngineOptions(device='cpu', dtype='float32'))
    embodiment_file = tmp_path / 'ur.yaml'
    embodiment_file.write_text(yaml.safe_dump(ur_embodiment().to_mapping()))
    engine = DreamZeroEngine.from_pretrained(
        folder, EngineOptions(device='cpu', dtype='float32', embodiment_file=str(embodiment_file))
    )
    reference = DreamZeroEngine.from_pretrained(
        ur_checkpoint, EngineOptions(device='cpu', dtype='float32', prompt_template=UR_TEMPLATE)
    )
    observation = ur_observation(3)
    np.testing.assert_array_equal(
        engine.infer(observation).actions, reference.infer(observation).actions
    )


@pytest.fixture(scope='module')
def lora(tmp_path_factory):
    root = tmp_path_factory.mktemp('lora-engine')
    base = write_random_checkpoint(root / 'base', 'tiny', seed=3)
    return {'base': base, **write_lora_checkpoints(base, root, layers=2)}


def test_lora_only_checkpoint_on_its_base_acts_as_the_merged_checkpoint(lora):
    observation = random_observation(seed=2)
    merged = DreamZeroEngine.from_pretrained(
        lora['merged'], EngineOptions(device='cpu', dtype='float32')
    )
    expected = merged.infer(observation).actions
    on_base = DreamZeroEngine.from_pretrained(
        lora['lora_only'],
        EngineOptions(device='cpu', dtype='float32', base_checkpoint=str(lora['base'])),
    )
    np.testing.assert_array_equal(on_base.infer(observation).actions, expected)
    peft_full = DreamZeroEngine.from_pretrained(
        lora['peft_full'], EngineOptions(device='cpu', dtype='float32')
    )
    np.testing.assert_array_equal(peft_full.infer(observation).actions, expected)
    base = DreamZeroEngine.from_pretrained(
        lora['base'], EngineOptions(device='cpu', dtype='float32')
    )
    assert np.abs(base.infer(observation).actions - expected).max() > 1e-3
    loaded = load_engine(
        lora['lora_only'],
        EngineOptions(device='cpu', dtype='float32', base_checkpoint=str(lora['base'])),
    )
    np.testing.assert_array_equal(loaded.infer(observation).actions, expected)


def test_lora_only_checkpoint_without_its_base_or_on_another_is_refused(lora, tmp_path):
    with pytest.raises(CheckpointError, match='LoRA adapters only .* supply the base checkpoint'):
        DreamZeroEngine.from_pretrained(
            lora['lora_only'], EngineOptions(device='cpu', dtype='float32')
        )
    tiny = EngineConfig.tiny()
    wide = tiny.replace(dit=dataclasses.replace(tiny.dit, dim=64, ffn_dim=128))
    other = write_random_checkpoint(tmp_path / 'other', wide)
    with pytest.raises(CheckpointError, match=r'adapter of .*blocks\.0\..* is \(64, 64\)'):
        DreamZeroEngine.from_pretrained(
            lora['lora_only'],
            EngineOptions(device='cpu', dtype='float32', base_checkpoint=str(other)),
        )


def test_encoders_missing_from_a_checkpoint_come_from_the_wan_files(lora, tmp_path):
    folder = tmp_path / 'no-t5'
    folder.mkdir()
    for path in lora['base'].rglob('*'):
        if path.is_file() and not path.name.endswith('.safetensors'):
            target = folder / path.relative_to(lora['base'])
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    prefix = 'action_head.text_encoder.'
    tensors = read_tensors(lora['base'])
    write_tensors(folder, {k: v for k, v in tensors.items() if not k.startswith(prefix)})
    with pytest.raises(CheckpointError, match='models_t5_umt5-xxl-enc-bf16.pth .* is not in'):
        DreamZeroEngine.from_pretrained(folder, EngineOptions(device='cpu', dtype='float32'))
    encoders = tmp_path / 'wan'
    encoders.mkdir()
    state = {k.removeprefix(prefix): v for k, v in tensors.items() if k.startswith(prefix)}
    torch.save(state, encoders / 'models_t5_umt5-xxl-enc-bf16.pth')
    engine = DreamZeroEngine.from_pretrained(
        folder, EngineOptions(device='cpu', dtype='float32', encoder_dir=str(encoders))
    )
    reference = DreamZeroEngine.from_pretrained(
        lora['base'], EngineOptions(device='cpu', dtype='float32')
    )
    observation = random_observation(seed=4)
    np.testing.assert_array_equal(
        engine.infer(observation).actions, reference.infer(observation).actions
    )
