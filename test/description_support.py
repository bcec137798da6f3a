# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""A bimanual robot description for tests: two copies of the packaged Panda on one base.

Each copy's links and joints get a ``left_``/``right_`` prefix, its first ``arm_dof`` joints are
renamed ``<side>_joint<i>`` (the YAM layout's names: six per arm, the seventh then stays at its
neutral position), and ``world`` holds the two arm bases 0.3 m apart along y.
"""

from importlib import resources
import xml.etree.ElementTree as ET

SIDES = {'left': 0.3, 'right': -0.3}


def bimanual_panda_urdf(arm_dof: int = 6) -> str:
    """Two Pandas (their roots at y +0.3 m and -0.3 m) under ``world``."""
    panda = ET.fromstring(
        (resources.files('dreamzero_ros') / 'descriptions' / 'panda.urdf').read_text()
    )
    children = {child.get('link') for child in panda.iter('child')}
    root = next(e.get('name') for e in panda.iterfind('link') if e.get('name') not in children)
    robot = ET.Element('robot', name='bimanual_panda')
    ET.SubElement(robot, 'link', name='world')
    for side, y in SIDES.items():
        renamed = {f'panda_joint{i}': f'{side}_joint{i}' for i in range(1, arm_dof + 1)}

        def name(old: str, side: str = side, renamed: dict = renamed) -> str:
            return renamed.get(old, f'{side}_{old}')

        for element in panda:
            if element.tag not in ('link', 'joint'):
                continue
            copy = ET.fromstring(ET.tostring(element))
            copy.set('name', name(copy.get('name')))
            for tag in ('parent', 'child'):
                part = copy.find(tag)
                if part is not None:
                    part.set('link', name(part.get('link')))
            mimic = copy.find('mimic')
            if mimic is not None:
                mimic.set('joint', name(mimic.get('joint')))
            robot.append(copy)
        mount = ET.SubElement(robot, 'joint', name=f'{side}_mount', type='fixed')
        ET.SubElement(mount, 'parent', link='world')
        ET.SubElement(mount, 'child', link=f'{side}_{root}')
        ET.SubElement(mount, 'origin', xyz=f'0 {y} 0', rpy='0 0 0')
    return ET.tostring(robot, encoding='unicode')


def chain_urdf(links: int, origin: str = '0 0 0.01') -> str:
    """A chain of ``links`` links joined by ``links - 1`` fixed joints, each at ``origin``."""
    parts = ['<?xml version="1.0"?><robot name="chain"><link name="link0"/>']
    for i in range(1, links):
        parts.append(
            f'<link name="link{i}"/><joint name="joint{i}" type="fixed">'
            f'<parent link="link{i - 1}"/><child link="link{i}"/>'
            f'<origin xyz="{origin}" rpy="0 0 0"/></joint>'
        )
    parts.append('</robot>')
    return ''.join(parts)


def panda_with_chain(links: int) -> str:
    """The packaged Panda with a chain of ``links`` more links hanging from its hand (fixed)."""
    panda = (resources.files('dreamzero_ros') / 'descriptions' / 'panda.urdf').read_text()
    chain = chain_urdf(links + 1).split('<link name="link0"/>', 1)[1].removesuffix('</robot>')
    mount = (
        '<link name="link0"/><joint name="chain_mount" type="fixed"><parent link="panda_hand"/>'
        '<child link="link0"/></joint>'
    )
    return panda.replace('</robot>', mount + chain + '</robot>')
