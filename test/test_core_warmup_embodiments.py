# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Every shipped embodiment starts with its shipped groups and the warm-up on (its default).

The warm-up's observation is built from the groups (every arm column of the command row), not
from ``arm_joint_names``: AgiBot's 18 arm columns, YAM's 12, DROID's 7. The policy is the real
engine on a random tiny checkpoint of each shipped layout.
"""

from embodiment_support import shipped_embodiment, write_shipped_checkpoint
import pytest

from dreamzero_ros.core.config.node_config import build_settings, defaults
from dreamzero_ros.core.config.node_validation import check_policy
from dreamzero_ros.core.policy.policy_factory import create_policy, warm_up
from dreamzero_ros.core.robot.robot_layout import RobotLayout

pytestmark = pytest.mark.slow  # processes, DDS or many model runs: see pytest.ini

#: Arm, gripper and velocity columns of each shipped embodiment's command row.
WIDTHS = {'agibot': (18, 2, 2), 'yam': (12, 2, 0), 'oxe_droid': (7, 1, 0)}


def _settings(tag, checkpoint):
    """The node's defaults with the shipped groups of ``tag``: only what the robot needs."""
    embodiment = shipped_embodiment(tag)
    arm, grippers, velocities = WIDTHS[tag]
    values = {
        'engine.checkpoint': str(checkpoint),
        'engine.device': 'cpu',
        'engine.dtype': 'float32',
        'engine.num_threads': 1,
        'action_groups': tag,
        'camera_keys': list(embodiment.camera_keys),
        'camera_topics': [f'cameras/{i}' for i in range(len(embodiment.camera_keys))],
    }
    if tag != 'oxe_droid':  # DROID's are the defaults; the others need a limit per column
        values.update(
            {
                'safety.joint_lower': [-3.0] * arm + [0.0] * grippers + [-0.2] * velocities,
                'safety.joint_upper': [3.0] * arm + [1.0] * grippers + [0.2] * velocities,
                'safety.max_step_delta': [0.2] * arm + [1.0] * grippers + [0.05] * velocities,
                **{
                    f'safety.{name}': [10.0] * arm
                    for name in ('max_velocity', 'stop_deceleration', 'max_acceleration')
                },
                'safety.max_jerk': [5000.0] * arm,
            }
        )
    settings = build_settings(values)
    assert settings.engine.warmup is defaults()['engine.warmup'] is True
    return settings


@pytest.mark.parametrize('tag', sorted(WIDTHS))
def test_the_shipped_groups_warm_up(tmp_path, tag):
    settings = _settings(tag, write_shipped_checkpoint(tmp_path, tag))
    policy = create_policy(settings, log=lambda line: None)
    try:
        layout = RobotLayout.from_metadata(policy.metadata)
        check_policy(settings, layout)
        assert len(settings.group_layout(layout).arm_joints) == WIDTHS[tag][0]
        assert warm_up(policy, settings, layout) > 0
    finally:
        policy.close()
