# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The bimanual scene: two ViperX 300 S arms with grippers facing each other across a table.

The arm's bodies, joints, ranges and inertials are those of gym-aloha's ``vx300s_left.xml``
(Apache-2.0, models/NOTICE), written out here per arm with the joint names of the shipped
``yam`` embodiment's groups (``left_joint1`` .. ``left_joint6``, the gripper ``left_gripper``:
the left finger's slide, 0.057 m open .. 0.021 m closed, the right finger mirroring it), so that
``action_groups`` with ``config/sim_bimanual_groups.yaml`` drives it. Cameras (the YAM keys):
``top_camera-images-rgb`` above the table, and one on each gripper. A cube and a bin lie between
the arms.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np

from dreamzero_ros.sim.scenes import (
    IMAGE_SIZE,
    MODELS,
    Camera,
    Scene,
    SceneObject,
    _add_camera,
    _add_object,
    _header,
    _servo,
)

#: Start pose of each arm (gym-aloha's START_ARM_POSE): waist .. wrist_rotate, rad.
VIPERX_HOME = (0.0, -0.96, 1.16, 0.0, -0.3, 0.0)
GRIPPER_OPEN, GRIPPER_CLOSED = 0.057, 0.021
#: Position servo stiffness, damping and torque limit of each arm joint.
VIPERX_KP = (300.0, 600.0, 400.0, 60.0, 60.0, 30.0)
VIPERX_KV = (30.0, 60.0, 40.0, 4.0, 4.0, 2.0)
VIPERX_EFFORT = (10.0, 20.0, 15.0, 2.0, 5.0, 1.0)
QUARTER = '0.707107 0 0 0.707107'
BIMANUAL_OBJECTS = (
    SceneObject('cube', 'red cube', 'box', (0.02, 0.02, 0.02), '0.85 0.15 0.1 1', 0.05),
    SceneObject('bin', 'bin', 'bin', (0.08, 0.08, 0.04), '0.3 0.45 0.75 1', 0.6),
)
TOP_CAMERA = Camera('top_camera-images-rgb', (0.0, -0.45, 0.75), (0.0, 0.0, 0.0), 60.0)

#: (body, parent position, inertial (pos, quat, mass, diaginertia), joint (name, axis, range))
_CHAIN = (
    ('shoulder_link', '0 0 0.079',
     ('0.000259233 -3.3552e-06 0.0116129', '-0.476119 0.476083 0.52279 0.522826', 0.798614,
      '0.00120156 0.00113744 0.0009388'), ('joint1', '0 0 1', '-3.14158 3.14158')),
    ('upper_arm_link', '0 0 0.04805',
     ('0.0206949 4e-10 0.226459', '0 0.0728458 0 0.997343', 0.792592,
      '0.00911338 0.008925 0.000759317'), ('joint2', '0 1 0', '-1.85005 1.25664')),
    ('upper_forearm_link', '0.05955 0 0.3',
     ('0.105723 0 0', '-0.000621631 0.704724 0.0105292 0.709403', 0.322228,
      '0.00144107 0.00134228 0.000152047'), ('joint3', '0 1 0', '-1.76278 1.6057')),
    ('lower_forearm_link', '0.2 0 0',
     ('0.0513477 0.00680462 0', '-0.702604 -0.0796724 -0.702604 0.0796724', 0.414823,
      '0.0005911 0.000546493 0.000155707'), ('joint4', '1 0 0', '-3.14158 3.14158')),
    ('wrist_link', '0.1 0 0',
     ('0.046743 -7.6652e-06 0.010565', '-0.00100191 0.544586 0.0026583 0.8387', 0.115395,
      '5.45707e-05 4.63101e-05 4.32692e-05'), ('joint5', '0 1 0', '-1.8675 2.23402')),
    ('gripper_link', '0.069744 0 0',
     ('0.0395662 -2.56311e-07 0.00400649', '0.62033 0.619916 -0.339682 0.339869', 0.251652,
      '0.000689546 0.000650316 0.000468142'), ('joint6', '1 0 0', '-3.14158 3.14158')),
)  # fmt: skip
#: Mesh of each body: (file, position, quaternion).
_MESHES = {
    'shoulder_link': (('2_shoulder.stl', '0 0 -0.003', QUARTER),),
    'upper_arm_link': (('3_upper_arm.stl', '0 0 0', QUARTER),),
    'upper_forearm_link': (('4_upper_forearm.stl', '0 0 0', '1 0 0 0'),),
    'lower_forearm_link': (('5_lower_forearm.stl', '0 0 0', '0 1 0 0'),),
    'wrist_link': (('6_wrist.stl', '0 0 0', QUARTER),),
    'gripper_link': (
        ('7_gripper.stl', '-0.02 0 0', QUARTER),
        ('9_gripper_bar.stl', '-0.020175 0 0', QUARTER),
        ('8_gripper_prop.stl', '-0.02 0 0', QUARTER),
    ),
}


def _arm(side: str, position: str, quat: str, asset: ET.Element) -> ET.Element:
    """One arm named ``side`` (left, right), its base at ``position`` turned by ``quat``."""
    base = ET.Element('body', name=f'{side}_base_link', pos=position, quat=quat)
    ET.SubElement(base, 'geom', mesh=f'{side}_1_base', material='viperx', quat=QUARTER,
                  **{'class': 'visual'})  # fmt: skip
    parent = base
    for name, offset, inertial, joint in _CHAIN:
        body = ET.SubElement(parent, 'body', name=f'{side}_{name}', pos=offset, gravcomp='1')
        pos, iquat, mass, diagonal = inertial
        ET.SubElement(body, 'inertial', pos=pos, quat=iquat, mass=f'{mass:g}',
                      diaginertia=diagonal)  # fmt: skip
        joint_name, axis, limits = joint
        ET.SubElement(body, 'joint', name=f'{side}_{joint_name}', axis=axis, range=limits,
                      armature='0.01', damping='0.1')  # fmt: skip
        for file, pos, mesh_quat in _MESHES[name]:
            mesh = f'{side}_{file[:-4]}'
            ET.SubElement(body, 'geom', mesh=mesh, material='viperx', pos=pos, quat=mesh_quat,
                          **{'class': 'visual'})  # fmt: skip
            ET.SubElement(body, 'geom', mesh=mesh, pos=pos, quat=mesh_quat,
                          **{'class': 'collision'})  # fmt: skip
        parent = body
    _add_camera(parent, Camera(f'{side}_camera-images-rgb', (0.0, 0.0, 0.11),
                               (0.35, 0.0, -0.06), 70.0, body=parent.get('name')))  # fmt: skip
    ET.SubElement(parent, 'site', name=f'{side}_gripper_tcp', pos='0.13 0 0', size='0.005',
                  group='4')  # fmt: skip
    for finger, sign in (('left', -1), ('right', 1)):
        body = ET.SubElement(parent, 'body', name=f'{side}_{finger}_finger_link',
                             pos='0.0687 0 0', gravcomp='1')  # fmt: skip
        ET.SubElement(body, 'inertial', pos=f'0.017344 {-sign * 0.0060692:g} 0', mass='0.034796',
                      diaginertia='2.48e-05 1.417e-05 1.208e-05')  # fmt: skip
        limits = f'{GRIPPER_CLOSED} {GRIPPER_OPEN}' if sign < 0 else \
            f'{-GRIPPER_OPEN} {-GRIPPER_CLOSED}'  # fmt: skip
        name = f'{side}_gripper' if sign < 0 else f'{side}_gripper_mirror'
        ET.SubElement(body, 'joint', name=name, type='slide', axis='0 1 0', range=limits,
                      damping='5', armature='0.01')  # fmt: skip
        mesh = f'{side}_10_finger_{finger}'
        pos = f'0.005 {sign * 0.052:g} 0'
        ET.SubElement(body, 'geom', mesh=mesh, material='viperx_finger', pos=pos,
                      euler='3.14 1.57 0', **{'class': 'visual'})  # fmt: skip
        ET.SubElement(body, 'geom', mesh=mesh, pos=pos, euler='3.14 1.57 0', condim='4',
                      friction='1.5 0.01 0.001', **{'class': 'collision'})  # fmt: skip
    folder = MODELS / 'meshes' / 'viperx'
    for path in sorted(folder.glob('*.stl')):
        ET.SubElement(asset, 'mesh', name=f'{side}_{path.stem}', file=str(path))
    return base


def bimanual_scene() -> Scene:
    """Two ViperX arms facing each other across a table, a top and two wrist cameras."""
    height, width = IMAGE_SIZE
    root = _header('bimanual', max(width, 640), max(height, 480))
    asset = root.find('asset')
    ET.SubElement(asset, 'material', name='viperx', rgba='0.15 0.15 0.15 1')
    ET.SubElement(asset, 'material', name='viperx_finger', rgba='0.35 0.35 0.35 1')
    world = ET.SubElement(root, 'worldbody')
    ET.SubElement(world, 'light', name='key', pos='0 -0.3 1.5', dir='0 0.2 -1',
                  directional='true', diffuse='0.55 0.55 0.55', castshadow='false')  # fmt: skip
    ET.SubElement(world, 'geom', name='floor', type='plane', size='3 3 0.1', pos='0 0 -0.75',
                  material='floor')  # fmt: skip
    ET.SubElement(world, 'geom', name='table', type='box', size='0.6 0.4 0.375',
                  pos='0 0 -0.375', material='table', friction='1 0.01 0.001')  # fmt: skip
    _add_camera(world, TOP_CAMERA)
    world.append(_arm('left', '-0.469 0 0', '1 0 0 0', asset))
    world.append(_arm('right', '0.469 0 0', '0 0 0 1', asset))
    for item in BIMANUAL_OBJECTS:
        _add_object(world, item)
    equality = ET.SubElement(root, 'equality')
    actuators = ET.SubElement(root, 'actuator')
    arm_joints, grippers = [], []
    for side in ('left', 'right'):
        ET.SubElement(equality, 'joint', joint1=f'{side}_gripper_mirror',
                      joint2=f'{side}_gripper', polycoef='0 -1 0 0 0')  # fmt: skip
        for index, (kp, kv, effort) in enumerate(zip(VIPERX_KP, VIPERX_KV, VIPERX_EFFORT,
                                                      strict=True)):  # fmt: skip
            joint = f'{side}_joint{index + 1}'
            _servo(actuators, joint, kp, kv, effort)
            arm_joints.append(joint)
        _servo(actuators, f'{side}_gripper', 400.0, 20.0, 15.0)
        grippers.append(f'{side}_gripper')
    return Scene(
        'bimanual',
        ET.tostring(root, encoding='unicode'),
        tuple(arm_joints),
        tuple(grippers),
        (TOP_CAMERA.name, 'left_camera-images-rgb', 'right_camera-images-rgb'),
        BIMANUAL_OBJECTS,
        tuple(float(q) for q in np.tile(VIPERX_HOME, 2)),
        '',
        ('left_gripper_tcp', 'right_gripper_tcp'),
        ('left_left_finger_link', 'left_right_finger_link', 'right_left_finger_link',
         'right_right_finger_link'),
        ((-0.16, 0.16), (-0.12, 0.2)),
    )  # fmt: skip
