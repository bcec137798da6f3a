# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The MuJoCo simulator without ROS: one model with the URDF, JTC's splines on physics, tasks.

The scene's Panda is built from the packaged URDF: its link frames must be the ones pinocchio
computes from that URDF (the safety envelope's kinematics), its joint ranges and torque limits
the URDF's. A trajectory followed with joint_trajectory_controller's follower (core/motion/jtc.py)
through the position servos must be tracked closely and held; the task's seeded layouts must
repeat and keep objects apart; the success check must pass only for an object resting inside
the container; the scripted policy must complete the task on the physics; the cameras render
on the CPU.
"""

import os

os.environ.setdefault('MUJOCO_GL', 'egl')

from importlib import resources  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from dreamzero_ros.core.motion.jtc import Point, Trajectory, TrajectoryFollower  # noqa: E402
from dreamzero_ros.core.motion.trajectory import spline_knots  # noqa: E402
from dreamzero_ros.core.robot.kinematics import LinkPoints  # noqa: E402
from dreamzero_ros.policy_types import Observation  # noqa: E402
from dreamzero_ros.sim.frames import SceneFrames  # noqa: E402
from dreamzero_ros.sim.physics import SimWorld  # noqa: E402
from dreamzero_ros.sim.scenes import droid_scene, xyaxes  # noqa: E402
from dreamzero_ros.sim.scripted_policy import ScriptedPickPlace  # noqa: E402
from dreamzero_ros.sim.tasks import MIN_GAP, TableTask  # noqa: E402

URDF = (resources.files('dreamzero_ros') / 'descriptions' / 'panda.urdf').read_text()
LINKS = [f'panda_link{i}' for i in range(1, 9)] + ['panda_hand', 'panda_hand_tcp']


@pytest.fixture(scope='module')
def world():
    return SimWorld(droid_scene(URDF))


def _follow(world, follower, joints, grip, seconds, task=None):
    """Run the follower's set-points through the servos for ``seconds``; largest tracking error."""
    end = world.time + seconds
    error = 0.0
    while world.time < end:
        follower.update(world.time)
        world.command_arm(joints, follower.position, follower.velocity)
        world.command_gripper('panda_finger_joint1', grip)
        world.step()
        error = max(error, float(np.abs(follower.position - world.positions(joints)).max()))
        if task is not None and task.check(world):
            break
    return error


def test_the_model_has_the_urdf_kinematics_limits_and_efforts(world):
    scene = world.scene
    points = LinkPoints(URDF, scene.arm_joints, LINKS, frame='base')
    rng = np.random.default_rng(3)
    model, data = world.model, world.data
    lower, upper = model.jnt_range[[model.joint(j).id for j in scene.arm_joints]].T
    for _ in range(5):
        q = rng.uniform(lower, upper)
        world.reset(q, [0.04])
        expected = points.positions(q)[0]
        actual = np.array([data.body(link).xpos for link in LINKS])
        np.testing.assert_allclose(actual, expected, atol=1e-9)
    # the URDF's ranges (panda_joint4: -3.0718 .. -0.0698) and effort limits (87 / 12 N m)
    np.testing.assert_allclose(model.joint('panda_joint4').range, [-3.0718, -0.0698])
    forces = [model.actuator(j).forcerange[1] for j in scene.arm_joints]
    assert forces == [87.0] * 4 + [12.0] * 3
    # the second finger mimics the first (the URDF's <mimic>)
    assert model.neq == 1 and model.eq_type[0] == 2  # mjEQ_JOINT


def test_jtc_splines_drive_the_servos_and_the_arm_holds_at_the_end(world):
    scene = world.scene
    joints = scene.arm_joints
    home = np.array(scene.home)
    world.reset(home, [0.04])
    follower = TrajectoryFollower(joints, home)
    now = world.time
    target = home + np.array([0.4, 0.3, -0.3, 0.4, 0.2, -0.3, 0.5])
    times = np.array([0.5, 1.5, 2.5])
    rows = np.stack([home + 0.3 * (target - home), home + 0.8 * (target - home), target])
    velocities, accelerations = spline_knots(times, rows, np.zeros(7), np.zeros(7))
    points = tuple(
        Point(float(t), tuple(p), tuple(v), tuple(a))
        for t, p, v, a in zip(times, rows, velocities, accelerations, strict=True)
    )
    follower.accept(Trajectory(0.0, joints, points), now)
    error = _follow(world, follower, joints, 0.04, 3.5)
    assert error < 0.01, f'tracking error {error:.4f} rad'
    np.testing.assert_allclose(world.positions(joints), target, atol=2e-3)
    assert np.abs(world.velocities(joints)).max() < 0.01
    # the measured state is physics, not the set-point: it lags while moving
    assert error > 1e-5


def test_layouts_repeat_by_seed_and_keep_objects_apart(world):
    task = TableTask(world.scene.objects)
    first, again, other = task.layout(5), task.layout(5), task.layout(6)
    assert first.poses == again.poses
    assert first.poses != other.poses
    for layout in (task.layout(seed) for seed in range(20)):
        names = list(layout.poses)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                (ax, ay, _), (bx, by, _) = layout.poses[a], layout.poses[b]
                assert np.hypot(ax - bx, ay - by) >= MIN_GAP
    with pytest.raises(ValueError, match='is not one of'):
        TableTask(world.scene.objects, target='bin')
    with pytest.raises(ValueError, match="task 'stack' is not one of put_in, pick_up"):
        TableTask(world.scene.objects, kind='stack')


def test_success_needs_the_object_resting_inside_the_container(world):
    task = TableTask(world.scene.objects, target='red_block', container='bin')
    world.reset(world.scene.home, [0.04])
    task.reset(world, 0)
    follower = TrajectoryFollower(world.scene.arm_joints, np.array(world.scene.home))
    _follow(world, follower, world.scene.arm_joints, 0.04, 1.0)
    assert not task.check(world) and task.instruction() == 'put the red block in the bin'
    x, y, _ = world.body_position('bin')
    world.place('red_block', (x, y, 0.2))  # above the bin, falling in
    assert not task.check(world)
    _follow(world, follower, world.scene.arm_joints, 0.04, 1.5, task)
    assert task.succeeded_at is not None and task.inside(world)
    # next to the bin: never
    task.reset(world, 0)
    world.place('red_block', (x + 0.2, y, 0.025))
    _follow(world, follower, world.scene.arm_joints, 0.04, 1.0, task)
    assert task.succeeded_at is None


@pytest.mark.parametrize('kind', ['put_in', 'pick_up'])
def test_the_scripted_policy_completes_the_task_on_the_physics(world, kind):
    scene = world.scene
    task = TableTask(scene.objects, target='green_block', container='bin', kind=kind)
    world.reset(scene.home, [0.04])
    task.reset(world, 11)
    policy = ScriptedPickPlace(world, task)
    follower = TrajectoryFollower(scene.arm_joints, np.array(scene.home))
    start = world.time
    while world.time < start + 16 and task.succeeded_at is None:
        now = world.time
        observation = Observation({}, world.positions(scene.arm_joints), np.zeros(1), '', now)
        chunk = policy.infer(observation)
        times = chunk.step_duration * np.arange(1, chunk.horizon + 1)
        rows = chunk.actions[:, :7].astype(float)
        velocities, accelerations = spline_knots(
            times, rows, follower.velocity, follower.acceleration
        )
        points = tuple(
            Point(float(t), tuple(p), tuple(v), tuple(a))
            for t, p, v, a in zip(times, rows, velocities, accelerations, strict=True)
        )
        follower.update(now)
        follower.accept(Trajectory(0.0, scene.arm_joints, points), now)
        _follow(world, follower, scene.arm_joints, 0.04 * (1 - chunk.actions[0, 7]), 0.5, task)
    assert task.succeeded_at is not None, world.body_position('green_block')
    if kind == 'pick_up':  # held up, between the fingers
        assert task.instruction() == 'pick up the green block'
        assert world.body_position('green_block')[2] > 0.1
        assert world.touching_all('green_block', task.fingers, 2)


#: Renders in a process of its own: Mesa's software rasteriser (llvmpipe) loads an LLVM that
#: crashes a later import of Triton (its own LLVM) in the same process.
RENDER = """
import json, os
os.environ.setdefault('MUJOCO_GL', 'egl')
import numpy as np
from dreamzero_ros.sim.cameras import CameraRenderer
from dreamzero_ros.sim.physics import SimWorld
from dreamzero_ros.sim.scenes import droid_scene
world = SimWorld(droid_scene())
renderer = CameraRenderer(world.model, 180, 320)
before = {c: renderer.render(world.data, c) for c in world.scene.cameras}
world.reset(np.array(world.scene.home) + np.array([0.5, 0.3, 0, 0.3, 0, 0, 0]), [0.04])
after = {c: renderer.render(world.data, c) for c in world.scene.cameras}
renderer.close()
print(json.dumps({c: [list(image.shape), str(image.dtype), float(image.std()),
                      float((np.abs(image.astype(int) - after[c]).max(axis=-1) > 20).mean())]
                  for c, image in before.items()}))
"""


def test_cameras_render_180x320_and_see_the_arm_move():
    import json
    import subprocess
    import sys

    result = subprocess.run([sys.executable, '-c', RENDER], capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    images = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(images) == {'wrist_image_left', 'exterior_image_1_left', 'exterior_image_2_left'}
    for camera, (shape, dtype, spread, changed) in images.items():
        assert shape == [180, 320, 3] and dtype == 'uint8', camera
        assert spread > 10, f'{camera} renders a flat image'
        assert changed > 0.005, f'{camera}: {changed:.4f} of the pixels changed'


def test_frames_compose_to_the_world_poses(world):
    import mujoco

    world.reset(np.array(world.scene.home) + 0.2, [0.02])
    frames = SceneFrames(world.model)
    poses = {'world': (np.zeros(3), np.eye(3))}
    transforms = frames.static(world.data) + frames.moving(world.data)
    for frame in sorted(
        transforms,
        key=lambda f: world.model.body(f.child).id if f.child in _bodies(world) else 10**6,
    ):
        position, rotation = poses[frame.parent]
        local = np.empty(9)
        mujoco.mju_quat2Mat(local, frame.quaternion)
        local = local.reshape(3, 3)
        poses[frame.child] = (position + rotation @ frame.position, rotation @ local)
    np.testing.assert_allclose(
        poses['panda_hand_tcp'][0], world.data.body('panda_hand_tcp').xpos, atol=1e-9
    )
    # a camera's frame is its optical frame: z along the view, which MuJoCo's -z is
    camera = world.data.cam('wrist_image_left')
    np.testing.assert_allclose(
        poses['wrist_image_left'][1][:, 2], -camera.xmat.reshape(3, 3)[:, 2], atol=1e-9
    )
    assert {f.child for f in frames.moving(world.data)} >= {'panda_link1', 'red_block'}


def _bodies(world):
    return {world.model.body(i).name for i in range(world.model.nbody)}


def test_xyaxes_looks_at_the_target():
    axes = np.array(
        [
            float(v)
            for v in xyaxes(np.zeros(3), np.array([1.0, 0, 0]), np.array([0, 0, 1.0])).split()
        ]
    )
    right, up = axes[:3], axes[3:]
    np.testing.assert_allclose(np.cross(right, up), [-1, 0, 0], atol=1e-12)  # -z forward
