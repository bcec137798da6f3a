#!/usr/bin/env bash
# Build the dreamzero_ros_interfaces messages (msg/*.msg) with rosidl from the ROS 2 PyPI wheels and
# install them into a venv (default .venv), where the wheels' loader finds their libraries.
# With a real ROS 2 install, use colcon instead (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(realpath "${1:-.venv}")
PY="$VENV/bin/python"

# The wheels' CMake targets name include folders of the machine that built them; point those at
# this interpreter's headers and numpy's (needs write access to /opt, as root in CI).
read -r PY_INCLUDE NP_INCLUDE < <("$PY" -c \
  'import numpy, sysconfig; print(sysconfig.get_paths()["include"], numpy.get_include())')
BUILT_ON=/opt/python/cp311-cp311
mkdir -p "$BUILT_ON/include" "$BUILT_ON/lib/python3.11/site-packages/numpy/_core"
ln -sfn "$PY_INCLUDE" "$BUILT_ON/include/python3.11"
ln -sfn "$NP_INCLUDE" "$BUILT_ON/lib/python3.11/site-packages/numpy/_core/include"

export AMENT_PREFIX_PATH="$VENV" CMAKE_PREFIX_PATH="$VENV" PATH="$VENV/bin:$PATH"
"$VENV/bin/colcon" --log-base build/interfaces/log build \
  --base-paths interfaces/dreamzero_ros_interfaces \
  --build-base build/interfaces --install-base "$VENV" --merge-install \
  --event-handlers console_cohesion- console_stderr- \
  --cmake-args -DBUILD_TESTING=OFF -DPython3_EXECUTABLE="$PY"
"$PY" -c 'from dreamzero_ros_interfaces.msg import ActionChunk, PolicyStatus' \
  && echo "build_interfaces: dreamzero_ros_interfaces installed into $VENV"
