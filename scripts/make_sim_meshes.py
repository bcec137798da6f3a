# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Write the simulator's meshes (dreamzero_ros/sim/models/meshes) from two wheels.

Small binary STL files from the robosuite and gym-aloha wheels (dreamzero_ros/sim/models/NOTICE):

    pip download --no-deps robosuite==1.5.2 gym-aloha==0.1.5 -d wheels
    unzip -q wheels/robosuite-*.whl -d wheels/robosuite
    unzip -q wheels/gym_aloha-*.whl -d wheels/aloha
    pip install fast-simplification   # quadric decimation; needed by this script only
    python scripts/make_sim_meshes.py wheels/robosuite wheels/aloha

Franka Panda (robosuite, MIT): the collision meshes as they are (link1's decimated), and per link
one visual mesh per colour, its parts merged and decimated. ViperX 300 S (gym-aloha, Apache-2.0):
each mesh decimated, in metres.
"""

from __future__ import annotations

import argparse
from pathlib import Path
import re
import struct

import fast_simplification
import numpy as np

OUT = Path(__file__).resolve().parents[1] / 'dreamzero_ros' / 'sim' / 'models' / 'meshes'
PANDA = 'robosuite/models/assets/robots/panda'
GRIPPER = 'robosuite/models/assets/grippers/meshes/panda_gripper'
ALOHA = 'gym_aloha/assets'
#: Colour names of the visual parts, by their material's rgba (robosuite's robot.xml).
COLOURS = {
    (1.0, 1.0, 1.0): 'white',
    (0.901961, 0.921569, 0.929412): 'white',
    (0.898039, 0.917647, 0.929412): 'white',
    (0.25098, 0.25098, 0.25098): 'dark',
    (0.25, 0.25, 0.25): 'dark',
    (0.039216, 0.541176, 0.780392): 'blue',
    (1.0, 0.0, 0.0): 'dark',
    (0.0, 1.0, 0.0): 'dark',
}
#: Triangles kept per visual mesh, at most.
VISUAL_TRIANGLES = 1500


def read_stl(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Vertices ``(V, 3)`` and faces ``(F, 3)`` of a binary STL file, duplicates merged."""
    data = path.read_bytes()
    (count,) = struct.unpack_from('<I', data, 80)
    records = np.frombuffer(
        data,
        dtype=np.dtype([('n', '<f4', 3), ('v', '<f4', (3, 3)), ('a', '<u2')]),
        count=count,
        offset=84,
    )
    corners = records['v'].reshape(-1, 3).astype(np.float64)
    return weld(corners, np.arange(len(corners)).reshape(-1, 3))


def read_obj(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Vertices and triangulated faces of a Wavefront OBJ file."""
    vertices, faces = [], []
    for line in path.read_text().splitlines():
        if line.startswith('v '):
            vertices.append([float(x) for x in line.split()[1:4]])
        elif line.startswith('f '):
            corners = [int(item.split('/')[0]) - 1 for item in line.split()[1:]]
            faces += [[corners[0], corners[i], corners[i + 1]] for i in range(1, len(corners) - 1)]
    return weld(np.array(vertices), np.array(faces))


def weld(vertices: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mesh with coincident vertices merged (decimation needs connected triangles)."""
    unique, index = np.unique(np.round(vertices, 7), axis=0, return_inverse=True)
    faces = index.reshape(-1)[faces]
    keep = (
        (faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2]) & (faces[:, 0] != faces[:, 2])
    )
    return unique, faces[keep]


def write_stl(path: Path, vertices: np.ndarray, faces: np.ndarray) -> None:
    """A binary STL file of the triangles (normals from the winding)."""
    corners = vertices[faces].astype(np.float32)
    normals = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-12)
    records = np.zeros(len(faces), dtype=[('n', '<f4', 3), ('v', '<f4', (3, 3)), ('a', '<u2')])
    records['n'], records['v'] = normals, corners
    path.write_bytes(
        b'dreamzero_ros sim mesh'.ljust(80, b' ')
        + struct.pack('<I', len(faces))
        + records.tobytes()
    )


def decimate(vertices: np.ndarray, faces: np.ndarray, triangles: int) -> tuple:
    """The mesh with at most ``triangles`` triangles (unchanged when it has fewer)."""
    if len(faces) <= triangles:
        return vertices, faces
    reduction = 1.0 - triangles / len(faces)
    return fast_simplification.simplify(
        vertices.astype(np.float32), faces.astype(np.int32), target_reduction=reduction
    )


def merge(meshes: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """One mesh of several."""
    vertices, faces, offset = [], [], 0
    for v, f in meshes:
        vertices.append(v)
        faces.append(f + offset)
        offset += len(v)
    return np.concatenate(vertices), np.concatenate(faces)


def panda_visual_colours(robot_xml: str) -> dict[str, str]:
    """Visual mesh name (e.g. ``link0_vis_3``) -> colour name, from robosuite's robot.xml."""
    materials = {
        name: COLOURS[tuple(round(float(x), 6) for x in rgba.split()[:3])]
        for name, rgba in re.findall(r'<material name="([^"]+)"[^>]*rgba="([^"]+)"', robot_xml)
    }
    colours = {}
    for geom in re.findall(r'<geom [^>]*>', robot_xml):
        mesh = re.search(r'mesh="(link\d_vis(?:_\d+)?)"', geom)
        if mesh:
            colours[mesh.group(1)] = materials[re.search(r'material="([^"]+)"', geom).group(1)]
    return colours


def main() -> None:
    """Write every mesh."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('robosuite', type=Path, help='the unpacked robosuite wheel')
    parser.add_argument('aloha', type=Path, help='the unpacked gym-aloha wheel')
    options = parser.parse_args()
    panda = options.robosuite / PANDA
    (OUT / 'panda').mkdir(parents=True, exist_ok=True)
    (OUT / 'viperx').mkdir(parents=True, exist_ok=True)
    for link in range(8):
        mesh = read_stl(panda / 'meshes' / f'link{link}.stl')
        write_stl(OUT / 'panda' / f'link{link}_collision.stl', *decimate(*mesh, 600))
    gripper = options.robosuite / GRIPPER
    for name in ('hand', 'finger'):
        write_stl(OUT / 'panda' / f'{name}_collision.stl', *read_stl(gripper / f'{name}.stl'))
    for name in ('hand_vis', 'finger_vis'):
        mesh = read_stl(gripper / f'{name}.stl')
        write_stl(
            OUT / 'panda' / f'{name.replace("_vis", "")}_white.stl',
            *decimate(*mesh, VISUAL_TRIANGLES),
        )
    parts: dict[tuple[int, str], list] = {}
    for mesh, colour in panda_visual_colours((panda / 'robot.xml').read_text()).items():
        link = int(mesh[4])
        folder = panda / 'obj_meshes' / f'link{link}_vis'
        parts.setdefault((link, colour), []).append(read_obj(folder / f'{mesh}.obj'))
    for (link, colour), meshes in sorted(parts.items()):
        vertices, faces = merge(meshes)
        share = max(200, int(VISUAL_TRIANGLES * len(faces) / 15000))
        write_stl(OUT / 'panda' / f'link{link}_{colour}.stl', *decimate(vertices, faces, share))
    aloha = options.aloha / ALOHA
    for path in sorted(aloha.glob('vx300s_*.stl')):
        if 'ar_tag' in path.name or 'gripper_finger' in path.name:
            continue
        vertices, faces = read_stl(path)
        name = path.name.replace('vx300s_', '').replace('custom_', '')
        write_stl(OUT / 'viperx' / name, *decimate(vertices * 0.001, faces, 1200))
    total = sum(p.stat().st_size for p in OUT.rglob('*.stl'))
    print(f'wrote {len(list(OUT.rglob("*.stl")))} meshes, {total / 1e6:.2f} MB, in {OUT}')


if __name__ == '__main__':
    main()
