# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Offscreen rendering of the scene's cameras, headless: EGL (a GPU, or Mesa on a CPU) or OSMesa.

MuJoCo picks its OpenGL platform from ``MUJOCO_GL`` when it is first imported; without a
display (``DISPLAY`` unset) :func:`headless_gl` makes that EGL, which runs on a GPU's driver and
on Mesa's software rasteriser (llvmpipe) alike. ``MUJOCO_GL=osmesa`` uses OSMesa instead where
installed. The renderer is made and used on one thread.
"""

from __future__ import annotations

import os


def headless_gl() -> str:
    """Set ``MUJOCO_GL`` (and PyOpenGL's platform) for offscreen rendering; return it.

    Must run before ``mujoco`` is imported anywhere in the process; a value already set (e.g.
    ``osmesa``, or ``glfw`` with a display) is kept.
    """
    backend = os.environ.get('MUJOCO_GL') or ('glfw' if os.environ.get('DISPLAY') else 'egl')
    os.environ['MUJOCO_GL'] = backend
    if backend in ('egl', 'osmesa'):
        os.environ.setdefault('PYOPENGL_PLATFORM', backend)
    return backend


class RenderingError(OSError):
    """MuJoCo cannot render offscreen here (no OpenGL library for ``MUJOCO_GL``)."""


_MESA_HINT = (
    'a CPU needs Mesa: libegl1 and libgl1-mesa-dri for MUJOCO_GL=egl, libosmesa6 for osmesa'
)


def load_mujoco():  # noqa: ANN201 - the mujoco module
    """``mujoco``, imported with a headless OpenGL platform (:func:`headless_gl`).

    Raises:
        RenderingError: the platform's library is missing (MuJoCo fails to import).

    """
    headless_gl()
    try:
        import mujoco
    except (ImportError, AttributeError, OSError) as error:
        raise RenderingError(
            f'MuJoCo cannot load the OpenGL platform MUJOCO_GL={os.environ["MUJOCO_GL"]!r} '
            f'({type(error).__name__}: {error}); {_MESA_HINT}'
        ) from None
    return mujoco


class CameraRenderer:
    """Renders named cameras of a model at one image size (``height x width``, RGB uint8)."""

    def __init__(self, model, height: int, width: int) -> None:  # noqa: ANN001 - mujoco.MjModel
        import mujoco

        try:
            self._renderer = mujoco.Renderer(model, height, width)
        except Exception as error:  # mujoco raises FatalError / RuntimeError per platform
            raise RenderingError(
                f'cannot render offscreen with MUJOCO_GL={os.environ.get("MUJOCO_GL")!r}: '
                f'{error}; {_MESA_HINT}'
            ) from error
        self.height, self.width = height, width

    def render(self, data, camera: str):  # noqa: ANN001, ANN201 - mujoco.MjData -> ndarray
        """The image of ``camera`` in the state ``data``, ``(H, W, 3)`` uint8 (a new array)."""
        self._renderer.update_scene(data, camera)
        return self._renderer.render().copy()

    def close(self) -> None:
        """Free the OpenGL context."""
        self._renderer.close()
