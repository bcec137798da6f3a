# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Setup for the dreamzero_ros ament_python package."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE_NAME = 'dreamzero_ros'

setup(
    name=PACKAGE_NAME,
    version='0.1.0',
    packages=find_packages(exclude=['test', 'test.*']),
    package_data={PACKAGE_NAME: ['embodiments/*.yaml']},
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + PACKAGE_NAME]),
        ('share/' + PACKAGE_NAME, ['package.xml']),
        ('share/' + PACKAGE_NAME + '/launch', glob('launch/*.launch.py')),
        ('share/' + PACKAGE_NAME + '/config', glob('config/*.yaml')),
        ('share/' + PACKAGE_NAME + '/msg', glob('msg/*.msg')),
    ],
    install_requires=['setuptools'],
    zip_safe=True,
    maintainer='dreamzero_ros maintainers',
    maintainer_email='dreamzero-ros@example.com',
    description='ROS 2 policy node, OpenPI bridge and rosbag replay for DreamZero.',
    license='Apache-2.0',
    extras_require={'test': ['pytest']},
    entry_points={
        'console_scripts': [
            'dreamzero-openpi-server = dreamzero_ros.openpi.cli:main',
            'dreamzero-replay = dreamzero_ros.replay.cli:replay_main',
            'dreamzero-make-bag = dreamzero_ros.replay.cli:make_bag_main',
            'dreamzero-live-replay = dreamzero_ros.replay.cli:live_main',
            'dreamzero-policy-node = dreamzero_ros.ros.policy_node_main:main',
            'dreamzero-demo-stream = dreamzero_ros.ros.demo_stream:main',
            'dreamzero-sim-arm = dreamzero_ros.ros.sim_arm:main',
            'dreamzero-demo = dreamzero_ros.demo:main',
            'dreamzero-engine-worker = dreamzero_ros.engine.cfg_parallel:main',
        ],
    },
)
