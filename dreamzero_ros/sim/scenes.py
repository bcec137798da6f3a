# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The simulated scenes as MJCF: a DROID station and a bimanual ViperX table.

``droid``: the Franka Panda with its hand, built from ``descriptions/panda.urdf``
(:mod:`.urdf_model`), standing at a table (its base on the table's edge, the table top at
``z = 0``), with DROID's three cameras: two exterior cameras (ZED 2, 70 degrees vertical field
of view) on tripods left and right of the robot looking across the workspace, and a wrist
camera (ZED mini, 60 degrees) on the hand, beside the fingers and looking along them, all
rendering 180x320 as the policy reads them. Graspable blocks and a can, and a bin, lie on the
table; the task (:mod:`.tasks`) places them per episode.

``bimanual``: two ViperX 300 S arms (gym-aloha's model) facing each other across a table, with
a top camera and a camera on each wrist: the joint and camera names of the shipped ``yam``
embodiment, so that the node's ``action_groups: yam`` drives it.

Each arm joint has a position servo with velocity feed-forward (``ctrl = q + kv / kp * qd``: the
force is ``kp (q_d - q) + kv (qd_d - qd)``), its torque limited to the joint's effort limit, on
a body with gravity compensation, as the Panda's own controller does. Meshes: NOTICE.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
import xml.etree.ElementTree as ET

import numpy as np

from dreamzero_ros.core.robot.panda import PANDA_READY
from dreamzero_ros.sim.urdf_model import LinkMeshes, robot_mjcf

MODELS = Path(str(resources.files('dreamzero_ros') / 'sim' / 'models'))
SCENES = ('droid', 'bimanual')
#: Policy image size (DROID's cameras downsampled), height x width.
IMAGE_SIZE = (180, 320)

#: Position servo stiffness and damping of the Panda's joints (N m / rad, N m s / rad).
PANDA_KP = (4500.0, 4500.0, 3500.0, 3500.0, 2000.0, 2000.0, 2000.0)
PANDA_KV = (450.0, 450.0, 350.0, 350.0, 200.0, 200.0, 200.0)
#: The Franka hand: finger stiffness (N/m), damping, and grasp force limit (N).
HAND_KP, HAND_KV, HAND_FORCE = 2000.0, 100.0, 70.0
PANDA_ARMATURE = 0.1
PANDA_COLOURS = {
    'white': '0.92 0.93 0.93 1',
    'dark': '0.25 0.25 0.25 1',
    'blue': '0.04 0.54 0.78 1',
}


@dataclass(frozen=True)
class SceneObject:
    """A free body on the table: its name (body), spoken name and geometry."""

    name: str
    spoken: str
    shape: str  # box, cylinder, bin
    size: tuple[float, ...]
    rgba: str
    mass: float


#: The DROID scene's objects: graspable things and one container.
DROID_OBJECTS = (
    SceneObject('red_block', 'red block', 'box', (0.022, 0.022, 0.022), '0.85 0.15 0.1 1', 0.08),
    SceneObject('green_block', 'green block', 'box', (0.02, 0.03, 0.02), '0.2 0.7 0.25 1', 0.08),
    SceneObject('yellow_can', 'yellow can', 'cylinder', (0.024, 0.04), '0.95 0.8 0.1 1', 0.1),
    SceneObject('bin', 'bin', 'bin', (0.09, 0.09, 0.045), '0.3 0.45 0.75 1', 0.8),
)


@dataclass(frozen=True)
class Camera:
    """A camera: name (the policy's camera key), pose (``look_at`` from ``pos``) and fovy."""

    name: str
    pos: tuple[float, float, float]
    look_at: tuple[float, float, float]
    fovy: float
    up: tuple[float, float, float] = (0.0, 0.0, 1.0)
    body: str = ''  # empty: fixed in the world


@dataclass(frozen=True)
class Scene:
    """A compiled-ready scene: its MJCF text and what the simulator needs to know of it."""

    name: str
    xml: str
    arm_joints: tuple[str, ...]
    gripper_joints: tuple[str, ...]
    cameras: tuple[str, ...]
    objects: tuple[SceneObject, ...]
    home: tuple[float, ...]
    description: str = ''
    #: Site of each gripper's grasp point.
    tcp_sites: tuple[str, ...] = field(default=())
    #: Bodies of the fingers (an object they touch is held, not resting).
    fingers: tuple[str, ...] = field(default=())
    #: Where the task places objects: x and y ranges on the table (world frame, m).
    workspace: tuple[tuple[float, float], tuple[float, float]] = ((0.38, 0.66), (-0.26, 0.26))


DROID_CAMERAS = (
    Camera('exterior_image_1_left', (0.42, 0.52, 0.42), (0.52, 0.0, 0.0), 70.0),
    Camera('exterior_image_2_left', (0.42, -0.52, 0.42), (0.52, 0.0, 0.0), 70.0),
)
#: The wrist camera in the hand frame: beside the fingers, looking along them (ZED mini).
WRIST_CAMERA = Camera(
    'wrist_image_left',
    (0.085, 0.0, 0.01),
    (0.0, 0.0, 0.16),
    60.0,
    up=(1.0, 0.0, 0.0),
    body='panda_hand',
)


def xyaxes(pos: np.ndarray, target: np.ndarray, up: np.ndarray) -> str:
    """MJCF ``xyaxes`` of a camera at ``pos`` looking at ``target`` (it looks along its -z)."""
    forward = np.asarray(target, float) - np.asarray(pos, float)
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, up)
    right /= np.linalg.norm(right)
    upward = np.cross(right, forward)
    return ' '.join(f'{v:.6f}' for v in (*right, *upward))


def _header(name: str, width: int, height: int) -> ET.Element:
    root = ET.Element('mujoco', model=name)
    ET.SubElement(root, 'compiler', angle='radian', autolimits='true', balanceinertia='true')
    ET.SubElement(
        root, 'option', timestep='0.002', integrator='implicitfast', cone='elliptic', impratio='10'
    )
    visual = ET.SubElement(root, 'visual')
    ET.SubElement(visual, 'global', offwidth=str(width), offheight=str(height))
    ET.SubElement(visual, 'quality', shadowsize='0', offsamples='0')
    ET.SubElement(
        visual, 'headlight', ambient='0.45 0.45 0.45', diffuse='0.5 0.5 0.5', specular='0.1 0.1 0.1'
    )
    default = ET.SubElement(root, 'default')
    for cls, attributes in (
        ('visual', {'type': 'mesh', 'contype': '0', 'conaffinity': '0', 'group': '2'}),
        ('collision', {'type': 'mesh', 'group': '3'}),
        (
            'pad',
            {
                'type': 'box',
                'group': '3',
                'friction': '1.5 0.01 0.001',
                'condim': '4',
                'solref': '0.005 1',
                'priority': '1',
            },
        ),
    ):
        ET.SubElement(ET.SubElement(default, 'default', **{'class': cls}), 'geom', **attributes)
    asset = ET.SubElement(root, 'asset')
    ET.SubElement(
        asset,
        'texture',
        name='sky',
        type='skybox',
        builtin='gradient',
        rgb1='0.75 0.8 0.85',
        rgb2='0.35 0.4 0.45',
        width='64',
        height='64',
    )
    ET.SubElement(
        asset,
        'texture',
        name='floor',
        type='2d',
        builtin='checker',
        rgb1='0.5 0.5 0.5',
        rgb2='0.42 0.42 0.42',
        width='64',
        height='64',
    )
    ET.SubElement(asset, 'material', name='floor', texture='floor', texrepeat='6 6')
    ET.SubElement(asset, 'material', name='table', rgba='0.62 0.5 0.38 1')
    return root


def _add_camera(parent: ET.Element, camera: Camera) -> None:
    ET.SubElement(
        parent,
        'camera',
        name=camera.name,
        pos=' '.join(map(str, camera.pos)),
        xyaxes=xyaxes(np.array(camera.pos), np.array(camera.look_at), np.array(camera.up)),
        fovy=f'{camera.fovy:g}',
    )


def _add_object(world: ET.Element, item: SceneObject) -> None:
    """A free body (placed by the task at each reset), its geoms visible and colliding."""
    body = ET.SubElement(world, 'body', name=item.name, pos='0 0 -1')
    ET.SubElement(body, 'freejoint', name=item.name)
    common = {'rgba': item.rgba, 'friction': '1.2 0.01 0.001', 'condim': '4'}
    if item.shape == 'box':
        ET.SubElement(
            body,
            'geom',
            type='box',
            size=' '.join(map(str, item.size)),
            mass=str(item.mass),
            **common,
        )
    elif item.shape == 'cylinder':
        ET.SubElement(
            body,
            'geom',
            type='cylinder',
            size=' '.join(map(str, item.size)),
            mass=str(item.mass),
            **common,
        )
    elif item.shape == 'bin':  # a floor and four walls, open at the top
        half_x, half_y, height = item.size
        wall = 0.005
        mass = item.mass / 5
        parts = [((half_x, half_y, wall), (0.0, 0.0, wall))]
        for sign in (-1, 1):
            parts.append(((wall, half_y, height / 2), (sign * (half_x - wall), 0.0, height / 2)))
            parts.append(((half_x, wall, height / 2), (0.0, sign * (half_y - wall), height / 2)))
        for size, pos in parts:
            ET.SubElement(
                body,
                'geom',
                type='box',
                size=' '.join(f'{v:g}' for v in size),
                pos=' '.join(f'{v:g}' for v in pos),
                mass=f'{mass:g}',
                **common,
            )


def panda_meshes() -> dict[str, LinkMeshes]:
    """The Panda's meshes by link (the files of models/meshes/panda)."""
    folder = MODELS / 'meshes' / 'panda'
    meshes = {}
    for link in range(8):
        visuals = tuple(
            (f'link{link}_{colour}.stl', colour)
            for colour in PANDA_COLOURS
            if (folder / f'link{link}_{colour}.stl').is_file()
        )
        meshes[f'panda_link{link}'] = LinkMeshes(visuals, (f'link{link}_collision.stl',))
    meshes['panda_hand'] = LinkMeshes((('hand_white.stl', 'white'),), ('hand_collision.stl',))
    pads = (((0.009, 0.004, 0.012), (0.0, 0.0075, 0.043)),)
    finger = LinkMeshes((('finger_white.stl', 'dark'),), ('finger_collision.stl',), pads)
    meshes['panda_leftfinger'] = meshes['panda_rightfinger'] = finger
    return meshes


def _panda(description: str, world: ET.Element, root: ET.Element) -> list[str]:
    """Add the Panda (base at the world origin) with its servos; the arm joint names."""
    folder = MODELS / 'meshes' / 'panda'
    robot = robot_mjcf(
        description,
        panda_meshes(),
        lambda file: str(folder / file),
        PANDA_COLOURS,
        joint_defaults={'armature': str(PANDA_ARMATURE)},
    )
    asset = root.find('asset')
    asset.extend(robot.assets)
    for body in robot.root.iter('body'):
        body.set('gravcomp', '1')
        if body.get('name') == WRIST_CAMERA.body:
            _add_camera(body, WRIST_CAMERA)
        if body.get('name') == 'panda_hand_tcp':
            ET.SubElement(body, 'site', name='panda_finger_joint1_tcp', size='0.005', group='4')
    world.append(robot.root)
    if robot.equality:
        ET.SubElement(root, 'equality').extend(robot.equality)
    actuators = ET.SubElement(root, 'actuator')
    arm = [name for name, (kind, *_) in robot.joints.items() if kind != 'prismatic']
    for name, kp, kv in zip(arm, PANDA_KP, PANDA_KV, strict=True):
        _, lower, upper, effort = robot.joints[name]
        _servo(actuators, name, kp, kv, effort)
    _servo(actuators, 'panda_finger_joint1', HAND_KP, HAND_KV, HAND_FORCE)
    ET.SubElement(root, 'contact').append(
        ET.Element('exclude', body1='panda_link7', body2='panda_hand')
    )
    return arm


def _servo(actuators: ET.Element, joint: str, kp: float, kv: float, force: float) -> None:
    """A position servo on ``joint``: ``kp (ctrl - q) - kv qd``, ``|force|`` at most."""
    ET.SubElement(
        actuators,
        'general',
        name=joint,
        joint=joint,
        gainprm=f'{kp:g}',
        biasprm=f'0 {-kp:g} {-kv:g}',
        biastype='affine',
        forcerange=f'{-force:g} {force:g}',
        forcelimited='true',
    )


def droid_scene(description: str | None = None) -> Scene:
    """The DROID station: Panda and hand at a table, three cameras, objects and a bin."""
    if description is None:
        description = (resources.files('dreamzero_ros') / 'descriptions' / 'panda.urdf').read_text()
    height, width = IMAGE_SIZE
    root = _header('droid', max(width, 640), max(height, 480))
    world = ET.SubElement(root, 'worldbody')
    ET.SubElement(
        world,
        'light',
        name='key',
        pos='0.4 0.6 1.8',
        dir='0 -0.3 -1',
        directional='true',
        diffuse='0.55 0.55 0.55',
        castshadow='false',
    )
    ET.SubElement(
        world, 'geom', name='floor', type='plane', size='3 3 0.1', pos='0 0 -0.75', material='floor'
    )
    ET.SubElement(
        world,
        'geom',
        name='table',
        type='box',
        size='0.5 0.7 0.375',
        pos='0.42 0 -0.375',
        material='table',
        friction='1 0.01 0.001',
    )
    for camera in DROID_CAMERAS:
        _add_camera(world, camera)
    for item in DROID_OBJECTS:
        _add_object(world, item)
    arm = _panda(description, world, root)
    return Scene(
        'droid',
        ET.tostring(root, encoding='unicode'),
        tuple(arm),
        ('panda_finger_joint1',),
        (WRIST_CAMERA.name, *(camera.name for camera in DROID_CAMERAS)),
        DROID_OBJECTS,
        PANDA_READY,
        description,
        ('panda_finger_joint1_tcp',),
        ('panda_leftfinger', 'panda_rightfinger'),
    )


def build_scene(name: str, description: str | None = None) -> Scene:
    """The scene called ``name`` (one of :data:`SCENES`)."""
    if name == 'droid':
        return droid_scene(description)
    if name == 'bimanual':
        from dreamzero_ros.sim.bimanual import bimanual_scene

        return bimanual_scene()
    raise ValueError(f'unknown scene {name!r}; choose one of {", ".join(SCENES)}')
