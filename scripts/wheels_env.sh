#!/usr/bin/env bash
# Sourced by build_interfaces.sh and colcon_build_test.sh with VENV set: where the venv's rclpy is
# one of the ROS 2 PyPI wheels, the environment a sourced ROS 2 install would give (the wheels'
# prefix for ament and CMake, VIRTUAL_ENV for CMake's Python), and the include folders the wheels'
# CMake targets name on the machine that built them, linked to this interpreter's and numpy's
# (needs write access to /opt, as root in CI). Sets WHEELS_NUMPY_INCLUDE for CMake (empty
# otherwise); with a sourced ROS 2 install (rclpy from outside the venv) it changes nothing.
WHEELS_NUMPY_INCLUDE=''
if "$VENV/bin/python" -c 'import rclpy, sys; sys.exit(not rclpy.__file__.startswith(sys.prefix))'
then
  read -r PY_INCLUDE NP_INCLUDE < <("$VENV/bin/python" -c \
    'import numpy, sysconfig; print(sysconfig.get_paths()["include"], numpy.get_include())')
  BUILT_ON=/opt/python/cp311-cp311
  mkdir -p "$BUILT_ON/include" "$BUILT_ON/lib/python3.11/site-packages/numpy/_core"
  ln -sfn "$PY_INCLUDE" "$BUILT_ON/include/python3.11"
  ln -sfn "$NP_INCLUDE" "$BUILT_ON/lib/python3.11/site-packages/numpy/_core/include"
  WHEELS_NUMPY_INCLUDE="$BUILT_ON/lib/python3.11/site-packages/numpy/_core/include"
  export AMENT_PREFIX_PATH="$VENV" CMAKE_PREFIX_PATH="$VENV" VIRTUAL_ENV="$VENV"
fi
export PATH="$VENV/bin:$PATH"
