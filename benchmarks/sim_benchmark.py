# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""The simulator's speed: render milliseconds per camera frame and the real-time factor.

    python benchmarks/sim_benchmark.py                  # 10 simulated seconds, the DROID scene
    MUJOCO_GL=egl python benchmarks/sim_benchmark.py    # the same, named (a GPU's EGL or Mesa's)

Runs ``dreamzero-sim``'s loop without ROS: JTC's follower (a trajectory that keeps the arm
moving) through the servos at every physics step, joint states read at ``--state-hz``, the
scene's three cameras rendered at ``--camera-hz`` (180x320, as the node publishes them). Prints
the OpenGL renderer (a GPU, or llvmpipe: Mesa on the CPU), milliseconds per physics step and per
rendered camera frame (p50 and p95; the read-back from the GPU included), and the real-time
factor (simulated seconds per wall-clock second) with and without rendering, and their ratio:
on a machine where rendering is the bottleneck the clock runs slower, never the control.
"""

from __future__ import annotations

import os
import statistics
import time

from dreamzero_ros.sim.cameras import headless_gl

headless_gl()

import numpy as np  # noqa: E402

from dreamzero_ros.cli_options import new_parser  # noqa: E402
from dreamzero_ros.core.motion.jtc import Point, Trajectory, TrajectoryFollower  # noqa: E402
from dreamzero_ros.sim.cameras import CameraRenderer  # noqa: E402
from dreamzero_ros.sim.physics import SimWorld  # noqa: E402
from dreamzero_ros.sim.scenes import IMAGE_SIZE, droid_scene  # noqa: E402


def _motion(world: SimWorld, start: float, seconds: float) -> Trajectory:
    """A trajectory swinging the arm's joints for ``seconds`` (knots every 0.5 s)."""
    home = np.array(world.scene.home)
    times = np.arange(0.5, seconds + 0.5, 0.5)
    rows = home + 0.3 * np.sin(times[:, None] * np.linspace(0.5, 1.5, len(home)))
    points = tuple(Point(float(t), tuple(r)) for t, r in zip(times, rows, strict=True))
    return Trajectory(start, world.scene.arm_joints, points)


def run(seconds: float, camera_hz: float, state_hz: float, render: bool) -> dict[str, object]:
    """Simulate ``seconds``; timings of steps and renders and the real-time factor."""
    world = SimWorld(droid_scene())
    joints = world.scene.arm_joints
    follower = TrajectoryFollower(joints, np.array(world.scene.home))
    follower.accept(_motion(world, world.time, seconds), world.time)
    renderer = CameraRenderer(world.model, *IMAGE_SIZE) if render else None
    steps, renders = [], []
    next_frame = next_state = world.time
    end = world.time + seconds
    wall = time.perf_counter()
    while world.time < end:
        begin = time.perf_counter()
        follower.update(world.time)
        world.command_arm(joints, follower.position, follower.velocity)
        world.step()
        if world.time >= next_state:
            world.positions(joints), world.velocities(joints)
            next_state += 1.0 / state_hz
        steps.append(time.perf_counter() - begin)
        if renderer is not None and world.time >= next_frame:
            for camera in world.scene.cameras:
                begin = time.perf_counter()
                renderer.render(world.data, camera)
                renders.append(time.perf_counter() - begin)
            next_frame += 1.0 / camera_hz
    elapsed = time.perf_counter() - wall
    gl = ''
    if renderer is not None:
        from OpenGL import GL

        gl = GL.glGetString(GL.GL_RENDERER).decode()
        renderer.close()
    return {
        'steps': steps,
        'renders': renders,
        'elapsed': elapsed,
        'seconds': seconds,
        'gl': gl,
        'timestep': world.timestep,
    }


def _ms(values: list[float], q: float) -> float:
    return 1e3 * float(np.quantile(values, q)) if values else float('nan')


def main() -> None:
    """Print the figures."""
    parser = new_parser('sim_benchmark', __doc__.splitlines()[0])
    parser.add_argument('--seconds', type=float, default=10.0, help='simulated seconds per run')
    parser.add_argument('--camera-hz', type=float, default=15.0, help='camera rate, Hz')
    parser.add_argument('--state-hz', type=float, default=100.0, help='joint state rate, Hz')
    options = parser.parse_args()
    physics = run(options.seconds, options.camera_hz, options.state_hz, render=False)
    full = run(options.seconds, options.camera_hz, options.state_hz, render=True)
    cores = os.cpu_count()
    step_p50, step_p95 = _ms(physics['steps'], 0.5), _ms(physics['steps'], 0.95)
    print(
        f'MUJOCO_GL={os.environ["MUJOCO_GL"]}, renderer: {full["gl"]}, {cores} CPU cores, '
        f'load {os.getloadavg()[0]:.1f}'
    )
    print(
        f'physics step ({1e3 * physics["timestep"]:.0f} ms of simulated time, JTC follower '
        f'included): p50 {step_p50:.3f} ms, p95 {step_p95:.3f} ms'
    )
    print(
        f'render one 180x320 camera frame: p50 {_ms(full["renders"], 0.5):.2f} ms, p95 '
        f'{_ms(full["renders"], 0.95):.2f} ms ({len(full["renders"])} frames)'
    )
    rtf_physics = physics['seconds'] / physics['elapsed']
    rtf_full = full['seconds'] / full['elapsed']
    share = statistics.fsum(full['renders']) / full['elapsed']
    print(
        f'real-time factor, physics only: {rtf_physics:.2f}; with 3 cameras at '
        f'{options.camera_hz:g} Hz: {rtf_full:.2f} ({rtf_full / rtf_physics:.2f} x the '
        f'physics-only rate); rendering takes {share:.0%} of the wall time'
    )


if __name__ == '__main__':
    main()
