# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""pip install of dreamzero_ros: the Python package, its share/ files and console scripts.

colcon builds the package with CMakeLists.txt instead (ament_cmake, with the messages). Console
scripts are declared in setup.cfg, which both read. pip installs no messages:
scripts/build_interfaces.sh generates them beside the installed package.
"""

from glob import glob

from setuptools import find_packages, setup

PACKAGE_NAME = 'dreamzero_ros'

setup(
    name=PACKAGE_NAME,
    version='0.1.0',
    # msg/ and action/ inside the package are generated per install (build_interfaces.sh)
    packages=find_packages(
        exclude=['test', 'test.*', f'{PACKAGE_NAME}.msg', f'{PACKAGE_NAME}.action']
    ),
    package_data={
        PACKAGE_NAME: [
            'embodiments/*.yaml',
            'descriptions/*.urdf',
            'descriptions/NOTICE',
            'sim/models/NOTICE',
            'sim/models/meshes/*/*.stl',
        ]
    },
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + PACKAGE_NAME]),
        ('share/' + PACKAGE_NAME, ['package.xml']),
        ('share/' + PACKAGE_NAME + '/launch', glob('launch/*.launch.py')),
        ('share/' + PACKAGE_NAME + '/config', glob('config/*.yaml')),
        ('share/' + PACKAGE_NAME + '/msg', glob('msg/*.msg')),
        ('share/' + PACKAGE_NAME + '/action', glob('action/*.action')),
    ],
    install_requires=['setuptools'],
    zip_safe=False,
    maintainer='dreamzero_ros maintainers',
    maintainer_email='dreamzero-ros@example.com',
    description='ROS 2 policy node, OpenPI bridge and rosbag replay for DreamZero.',
    license='Apache-2.0',
    extras_require={'test': ['pytest']},
)
