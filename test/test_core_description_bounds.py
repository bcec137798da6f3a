# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Robot descriptions are bounded before the kinematics library sees them.

pinocchio's URDF loader dies with SIGSEGV on a chain of a few thousand links, takes minutes on
tens of thousands, and passes ``<origin xyz="1e300 0 0">`` on to forward kinematics that then
overflow; ROS's URDF parser refuses duplicate link and joint names, which ElementTree does not.
"""

from importlib import resources
import sys

from description_support import bimanual_panda_urdf, chain_urdf
import pytest
from test_core_robot_description import panda_urdf

from dreamzero_ros.core.robot.description_bounds import DescriptionBounds, check_description
from dreamzero_ros.core.robot.robot_description import RobotDescription

PANDA = (resources.files('dreamzero_ros') / 'descriptions' / 'panda.urdf').read_text()


@pytest.fixture
def no_kinematics(monkeypatch):
    """Any use of pinocchio fails the test: a refused description never reaches it."""
    monkeypatch.setitem(sys.modules, 'pinocchio', None)


def test_real_descriptions_pass():
    for urdf in (PANDA, bimanual_panda_urdf(), panda_urdf()):
        check_description(urdf)
    assert RobotDescription.parse(PANDA).name == 'panda'


@pytest.mark.parametrize(
    ('links', 'message'),
    [
        (5000, r'has 5000 links; at most 1000 are accepted \(robot_description.max_links\)'),
        (20_000, r'has 20000 links; at most 1000 are accepted'),
        (100_000, r'is \d+ bytes; at most 8388608 are accepted \(robot_description.max_bytes\)'),
    ],
)
def test_huge_descriptions_are_refused_in_one_line(links, message, no_kinematics):
    with pytest.raises(ValueError, match=message) as error:
        RobotDescription.parse(chain_urdf(links), source='/robot_description')
    assert '\n' not in str(error.value)
    assert str(error.value).startswith('robot description (/robot_description)')


def test_depth_is_bounded_separately_from_the_link_count(no_kinematics):
    with pytest.raises(ValueError, match=r"more than 256 joints deep at link 'link257' "):
        check_description(chain_urdf(300))
    check_description(chain_urdf(300), DescriptionBounds(max_depth=299))
    with pytest.raises(ValueError, match=r'more than 8 joints deep'):
        check_description(chain_urdf(10), DescriptionBounds(max_depth=8))


@pytest.mark.parametrize(
    ('old', 'new', 'message'),
    [
        ('xyz="0 0 0.01"', 'xyz="1e300 0 0"', r'<origin xyz="1e300 0 0"> of joint .joint1. is '
         r'beyond \+-1000 \(robot_description.max_length\)'),
        ('xyz="0 0 0.01"', 'xyz="nan 0 0"', 'is not finite'),
        ('xyz="0 0 0.01"', 'xyz="inf 0 0"', 'is not finite'),
        ('xyz="0 0 0.01"', 'xyz="0 0"', 'needs 3 numbers'),
        ('xyz="0 0 0.01"', 'xyz="0 0 x"', 'is not a number'),
        ('rpy="0 0 0"', 'rpy="0 0 1e12"', r'beyond \+-1e\+09 \(robot_description.max_value\)'),
    ],
)  # fmt: skip
def test_numbers_are_finite_and_bounded(old, new, message, no_kinematics):
    with pytest.raises(ValueError, match=message):
        check_description(chain_urdf(3).replace(old, new, 1))


def test_numbers_anywhere_in_a_link_or_joint_are_checked(no_kinematics):
    inertial = '<inertial><mass value="1e400"/></inertial></link>'
    with pytest.raises(ValueError, match=r"<mass value=\"1e400\"> of link 'l7'"):
        check_description(panda_urdf().replace('<link name="l7"/>', f'<link name="l7">{inertial}'))
    huge_box = '<visual><geometry><box size="1 1 5000"/></geometry></visual></link>'
    with pytest.raises(ValueError, match=r'<box size="1 1 5000"> of link .l1. .*max_length'):
        check_description(panda_urdf().replace('<link name="l1"/>', f'<link name="l1">{huge_box}'))
    with pytest.raises(ValueError, match=r'<limit upper="1e\+99"> of joint .panda_joint3.'):
        check_description(panda_urdf(upper=(1, 1, 1e99, 1, 1, 1, 1)), DescriptionBounds())


def test_ros_urdf_parser_refusals_are_refused(no_kinematics):
    joint4 = panda_urdf().split('<joint name="panda_joint4"')[1].split('</joint>')[0]
    again = f'<link name="l4b"/><joint name="panda_joint4"{joint4.replace("l4", "l4b")}</joint>'
    with pytest.raises(ValueError, match=r"joint 'panda_joint4' is not unique"):
        RobotDescription.parse(panda_urdf(extra=again))
    with pytest.raises(ValueError, match=r"link 'l3' is not unique"):
        RobotDescription.parse(panda_urdf(extra='<link name="l3"/>'))
    orphan = '<joint name="j" type="fixed"><parent link="l7"/><child link="nowhere"/></joint>'
    with pytest.raises(ValueError, match=r"child link 'nowhere' of joint 'j' not found"):
        check_description(panda_urdf(extra=orphan))
    second = '<joint name="j" type="fixed"><parent link="l1"/><child link="l5"/></joint>'
    with pytest.raises(ValueError, match=r"link 'l5' is the child of joints 'panda_joint5' and"):
        check_description(panda_urdf(extra=second))
    with pytest.raises(ValueError, match=r'needs one root link, has 2: island, l0'):
        check_description(panda_urdf(extra='<link name="island"/>'))
    loop = (
        '<link name="a"/><link name="b"/>'
        '<joint name="ab" type="fixed"><parent link="a"/><child link="b"/></joint>'
        '<joint name="ba" type="fixed"><parent link="b"/><child link="a"/></joint>'
    )
    with pytest.raises(ValueError, match=r'not a tree: 2 links in a cycle'):
        check_description(panda_urdf(extra=loop))


def test_a_description_file_is_read_only_up_to_the_bound(tmp_path, no_kinematics):
    big = tmp_path / 'big.urdf'
    big.write_text(chain_urdf(100_000))
    with pytest.raises(ValueError, match=r'more than 1024 bytes \(robot_description.max_bytes\)'):
        RobotDescription.read(big, bounds=DescriptionBounds(max_bytes=1024))
