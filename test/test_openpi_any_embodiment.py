# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The OpenPI bridge serving a robot other than DROID: metadata and keys follow the embodiment."""

from __future__ import annotations

from embodiment_support import UR_TEMPLATE, ur_observation, write_ur_checkpoint
import numpy as np
from openpi_support import SCRIPTS, run_openpi
import pytest

from dreamzero_ros.engine import DreamZeroEngine
from dreamzero_ros.engine.options import EngineOptions
from dreamzero_ros.openpi import OpenPIServer, RemoteOpenPIPolicy, ServerConfig
from dreamzero_ros.openpi.observation_keys import (
    EmbodimentKeys,
    embodiment_observation_to_request,
    embodiment_request_to_observation,
)
from dreamzero_ros.policy_types import ObservationError

CLIENT = str(SCRIPTS / 'openpi_embodiment_client.py')


@pytest.fixture(scope='module')
def engine(tmp_path_factory):
    folder = write_ur_checkpoint(tmp_path_factory.mktemp('ur'))
    return DreamZeroEngine.from_pretrained(
        folder, EngineOptions(device='cpu', dtype='float32', prompt_template=UR_TEMPLATE)
    )


@pytest.fixture(scope='module')
def server(engine):
    handle = OpenPIServer(engine, ServerConfig(port=0)).start()
    yield handle
    handle.stop()


def test_reference_client_builds_requests_from_the_metadata(server):
    out = run_openpi([CLIENT, '--port', str(server.port), '--requests', '2'])
    metadata = out['metadata']
    assert metadata['embodiment'] == 'ur5e_lab'
    assert metadata['cameras'] == ['front', 'wrist']
    assert metadata['camera_resolutions'] == [[24, 64], [24, 64]]
    assert metadata['state_keys'] == ['arm_joints', 'gripper_width']
    assert metadata['state_dims'] == [6, 1] and metadata['gripper_state_keys'] == ['gripper_width']
    assert metadata['action_dim'] == 7 and metadata['control_hz'] == 10.0
    assert out['replies'] == [{'shape': [24, 7], 'dtype': '<f4', 'finite': True}] * 2
    refused = run_openpi([CLIENT, '--port', str(server.port), '--drop-state-key', 'arm_joints'])
    reply = refused['replies'][0]
    assert (
        reply['raised'] == 'RuntimeError' and "missing 'observation/arm_joints'" in reply['message']
    )


def test_remote_policy_sends_the_embodiments_keys_and_gets_the_engines_actions(server, engine):
    observation = ur_observation(5, session_id='remote')
    with RemoteOpenPIPolicy(server.url) as remote:
        assert remote.metadata['cameras'] == ['front', 'wrist']
        chunk = remote.infer(observation)
    local = engine.infer(ur_observation(5, session_id='local'))
    assert chunk.actions.shape == (24, 7) and chunk.step_duration == pytest.approx(0.1)
    np.testing.assert_allclose(chunk.actions, local.actions, atol=1e-5)


def test_requests_and_observations_convert_both_ways(engine):
    keys = EmbodimentKeys.from_metadata(engine.metadata)
    observation = ur_observation(1)
    request = embodiment_observation_to_request(observation, keys)
    assert set(request) == {
        'observation/front',
        'observation/wrist',
        'observation/arm_joints',
        'observation/gripper_width',
        'prompt',
    }
    back = embodiment_request_to_observation(request, keys)
    np.testing.assert_array_equal(back.joint_position, observation.joint_position)
    np.testing.assert_array_equal(back.gripper_position, observation.gripper_position)
    for camera in ('front', 'wrist'):
        np.testing.assert_array_equal(back.images[camera], observation.images[camera])
    request['observation/arm_joints'] = np.zeros(7)
    with pytest.raises(ObservationError, match='arm_joints: expected 6 values'):
        embodiment_request_to_observation(request, keys)
    assert EmbodimentKeys.from_metadata({'embodiment': 'oxe_droid'}) is None
