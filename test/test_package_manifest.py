# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""package.xml and CMakeLists.txt agree with the code: one ament_cmake package with interfaces.

Every ROS package the code imports is declared (the optional ones, imported only where present,
deliberately not), every declared one is used, every interface definition is generated with the
packages its fields need, and everything CMakeLists.txt finds is declared for rosdep.
"""

import ast
from pathlib import Path
import re
import xml.etree.ElementTree as ElementTree

from package_support import python_sources
import pytest

ROOT = Path(__file__).resolve().parents[1]
# ROS packages the code may import, and the rosdep key that provides each.
ROS_IMPORTS = {
    'rclpy': 'rclpy',
    'rcl_interfaces': 'rcl_interfaces',
    'builtin_interfaces': 'builtin_interfaces',
    'std_msgs': 'std_msgs',
    'std_srvs': 'std_srvs',
    'sensor_msgs': 'sensor_msgs',
    'trajectory_msgs': 'trajectory_msgs',
    'diagnostic_msgs': 'diagnostic_msgs',
    'geometry_msgs': 'geometry_msgs',
    'nav_msgs': 'nav_msgs',
    'visualization_msgs': 'visualization_msgs',
    'rosgraph_msgs': 'rosgraph_msgs',
    'tf2_msgs': 'tf2_msgs',
    'lifecycle_msgs': 'lifecycle_msgs',
    'action_msgs': 'action_msgs',
    'ament_index_python': 'ament_index_python',
    'launch': 'launch',
    'launch_ros': 'launch_ros',
}
# Imported only where installed (package.xml says why they are not declared).
OPTIONAL_IMPORTS = {'cv_bridge', 'control_msgs'}
# What generating the interfaces needs besides the packages their fields name.
INTERFACE_TOOLS = {'ament_cmake', 'ament_cmake_python', 'rosidl_default_generators'}
BUILD_TAGS = ('buildtool_depend', 'build_depend', 'depend', 'test_depend')


def _manifest() -> ElementTree.Element:
    return ElementTree.parse(ROOT / 'package.xml').getroot()


def _depends(root: ElementTree.Element, *tags: str) -> set[str]:
    return {element.text.strip() for tag in tags for element in root.iter(tag)}


def _cmake() -> str:
    return (ROOT / 'CMakeLists.txt').read_text()


def _tree(path: Path) -> ast.AST:
    return ast.parse(path.read_text(), filename=str(path))


def _imports(tree: ast.AST) -> list[tuple[str, ast.AST]]:
    """``(top-level module, import node)`` for every absolute import in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name.split('.')[0], node) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module.split('.')[0], node))
    return found


def _code() -> list[Path]:
    return python_sources('dreamzero_ros') + python_sources('launch')


def _imported_top_level_modules(paths: list[Path]) -> set[str]:
    return {module for path in paths for module, _ in _imports(_tree(path))}


def test_manifest_is_format_3_ament_cmake_interface_package():
    root = _manifest()
    assert root.tag == 'package'
    assert root.get('format') == '3'
    assert root.findtext('name') == 'dreamzero_ros'
    assert root.find('export/build_type').text == 'ament_cmake'
    for field in ('version', 'description', 'maintainer', 'license'):
        assert root.findtext(field), f'package.xml lacks <{field}>'
    assert 'rosidl_interface_packages' in _depends(root, 'member_of_group')
    assert INTERFACE_TOOLS <= _depends(root, 'buildtool_depend')
    assert 'rosidl_default_runtime' in _depends(root, 'exec_depend', 'depend')
    assert re.search(r'^project\(dreamzero_ros\)$', _cmake(), re.MULTILINE)


def test_ruff_replaces_the_ament_linters():
    test_deps = _depends(_manifest(), 'test_depend')
    assert {'ament_cmake_pytest', 'python3-pytest'} <= test_deps
    assert not test_deps & {'ament_copyright', 'ament_flake8', 'ament_pep257', 'ament_lint_auto'}


def test_every_package_cmake_finds_is_declared():
    found = set(re.findall(r'find_package\((\w+)', _cmake()))
    assert {'ament_cmake', 'rosidl_default_generators', 'ament_cmake_pytest'} <= found
    missing = found - _depends(_manifest(), *BUILD_TAGS)
    assert not missing, f'CMakeLists.txt finds packages package.xml does not declare: {missing}'


def _interface_files() -> list[Path]:
    return sorted((ROOT / 'msg').glob('*.msg')) + sorted((ROOT / 'action').glob('*.action'))


def test_every_interface_definition_is_generated():
    files = _interface_files()
    assert {path.name for path in files} >= {
        'ActionChunk.msg',
        'PolicyStatus.msg',
        'RunTask.action',
    }
    generated = re.search(r'rosidl_generate_interfaces\((.*?)\)', _cmake(), re.DOTALL).group(1)
    for path in files:
        assert f'"{path.parent.name}/{path.name}"' in generated, f'{path.name} is not generated'


def test_interface_dependencies_are_declared_and_passed_to_rosidl():
    used = set()
    for path in _interface_files():
        for line in path.read_text().splitlines():
            field_type = line.split('#')[0].split()[:1]
            if field_type and '/' in field_type[0]:
                used.add(field_type[0].split('/')[0])
        if path.suffix == '.action':  # goal ids and status of every action
            used |= {'action_msgs', 'unique_identifier_msgs'}
    assert {'std_msgs', 'builtin_interfaces', 'action_msgs'} <= used
    generated = re.search(r'rosidl_generate_interfaces\((.*?)\)', _cmake(), re.DOTALL).group(1)
    passed = set(generated.split('DEPENDENCIES', 1)[1].split())
    assert used <= passed, f'not in DEPENDENCIES of rosidl_generate_interfaces: {used - passed}'
    declared = _depends(_manifest(), 'depend')
    assert used <= declared, f'used by the interfaces, not a <depend>: {used - declared}'


@pytest.mark.parametrize('sources', ['dreamzero_ros', 'launch'])
def test_every_imported_ros_package_is_declared(sources):
    imported = _imported_top_level_modules(python_sources(sources))
    needed = {ROS_IMPORTS[module] for module in imported if module in ROS_IMPORTS}
    missing = needed - _depends(_manifest(), 'depend', 'exec_depend')
    assert not missing, f'imported in {sources}/ but not declared in package.xml: {missing}'
    interfaces = {m for m in imported if m.endswith(('_msgs', '_srvs', '_interfaces'))}
    unknown = interfaces - set(ROS_IMPORTS) - OPTIONAL_IMPORTS
    assert not unknown, f'ROS packages missing from ROS_IMPORTS here: {unknown}'


def test_every_declared_ros_dependency_is_used():
    imported = _imported_top_level_modules(_code())
    declared = _depends(_manifest(), 'depend', 'exec_depend') & set(ROS_IMPORTS.values())
    used_by_interfaces = {'action_msgs', 'builtin_interfaces', 'std_msgs'}
    unused = {dep for dep in declared if dep not in imported | used_by_interfaces}
    assert not unused, f'declared in package.xml but never imported: {unused}'


def _guarded_by_import_error(tree: ast.AST, target: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(target in ast.walk(stmt) for stmt in node.body):
            for handler in node.handlers:
                names = ast.walk(handler.type) if handler.type else []
                if any(isinstance(n, ast.Name) and n.id == 'ImportError' for n in names):
                    return True
    return False


def test_optional_packages_are_undeclared_and_imported_only_where_present():
    declared = _depends(_manifest(), *BUILD_TAGS, 'exec_depend', 'build_export_depend')
    assert not OPTIONAL_IMPORTS & declared
    seen = set()
    for path in _code():
        tree = _tree(path)
        for module, node in _imports(tree):
            if module in OPTIONAL_IMPORTS:
                seen.add(module)
                assert _guarded_by_import_error(tree, node), (
                    f'{path.name} imports {module} without an ImportError fallback'
                )
    assert seen == OPTIONAL_IMPORTS
