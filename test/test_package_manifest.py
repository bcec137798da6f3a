# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""package.xml is a valid format-3 ament_python manifest whose dependencies match the imports."""

import ast
from pathlib import Path
import xml.etree.ElementTree as ElementTree

import pytest

ROOT = Path(__file__).resolve().parents[1]
# ROS packages the code may import, and the rosdep key that provides each.
ROS_IMPORTS = {
    'rclpy': 'rclpy',
    'builtin_interfaces': 'builtin_interfaces',
    'std_msgs': 'std_msgs',
    'std_srvs': 'std_srvs',
    'sensor_msgs': 'sensor_msgs',
    'trajectory_msgs': 'trajectory_msgs',
    'diagnostic_msgs': 'diagnostic_msgs',
    'rosgraph_msgs': 'rosgraph_msgs',
    'lifecycle_msgs': 'lifecycle_msgs',
    'cv_bridge': 'cv_bridge',
    'launch': 'launch',
    'launch_ros': 'launch_ros',
    'dreamzero_ros_interfaces': 'dreamzero_ros_interfaces',
}


def _manifest() -> ElementTree.Element:
    return ElementTree.parse(ROOT / 'package.xml').getroot()


def _depends(root: ElementTree.Element, *tags: str) -> set[str]:
    return {element.text.strip() for tag in tags for element in root.iter(tag)}


def _imported_top_level_modules(paths: list[Path]) -> set[str]:
    modules = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split('.')[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules.add(node.module.split('.')[0])
    return modules


def test_manifest_is_format_3_ament_python():
    root = _manifest()
    assert root.tag == 'package'
    assert root.get('format') == '3'
    assert root.findtext('name') == 'dreamzero_ros'
    assert root.find('export/build_type').text == 'ament_python'
    for field in ('version', 'description', 'maintainer', 'license'):
        assert root.findtext(field), f'package.xml lacks <{field}>'


def test_manifest_lists_test_dependencies():
    test_deps = _depends(_manifest(), 'test_depend')
    assert {'ament_copyright', 'ament_flake8', 'ament_pep257', 'python3-pytest'} <= test_deps


@pytest.mark.parametrize(
    ('sources', 'tags'),
    [
        ('dreamzero_ros', ('depend', 'exec_depend')),
        ('launch', ('depend', 'exec_depend')),
    ],
)
def test_every_imported_ros_package_is_declared(sources, tags):
    imported = _imported_top_level_modules(sorted((ROOT / sources).rglob('*.py')))
    needed = {ROS_IMPORTS[module] for module in imported if module in ROS_IMPORTS}
    missing = needed - _depends(_manifest(), *tags)
    assert not missing, f'imported in {sources}/ but not declared in package.xml: {missing}'


def test_every_declared_ros_dependency_is_used():
    imported = _imported_top_level_modules(
        sorted(ROOT.glob('dreamzero_ros/**/*.py')) + sorted(ROOT.glob('launch/*.py'))
    )
    declared = _depends(_manifest(), 'depend', 'exec_depend') & set(ROS_IMPORTS.values())
    unused = {dep for dep in declared if dep not in imported}
    assert not unused, f'declared in package.xml but never imported: {unused}'


def test_interface_package_builds_the_top_level_messages():
    interfaces = ROOT / 'interfaces/dreamzero_ros_interfaces'
    root = ElementTree.parse(interfaces / 'package.xml').getroot()
    assert root.find('export/build_type').text == 'ament_cmake'
    assert 'rosidl_interface_packages' in {e.text for e in root.iter('member_of_group')}
    cmake = (interfaces / 'CMakeLists.txt').read_text()
    for msg in sorted((ROOT / 'msg').glob('*.msg')):
        assert f'msg/{msg.name}' in cmake, f'{msg.name} is not generated'
