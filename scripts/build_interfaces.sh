#!/usr/bin/env bash
# Build the package's interfaces (msg/*.msg, action/*.action) with rosidl and add them to the
# dreamzero_ros that pip installed into a venv (default .venv): the generated Python modules
# (dreamzero_ros.msg, dreamzero_ros.action) beside the installed package, in place for
# `pip install -e .` as a compiled extension would be, and their libraries in the venv's lib/
# (where the ROS 2 wheels' loader finds them, and the run path of the generated modules points).
# rosidl and ament come from where the venv's rclpy comes from: the venv's ROS 2 PyPI wheels, or a
# sourced ROS 2 install (scripts/bootstrap.sh). With a ROS 2 workspace, colcon builds the whole
# package instead (README).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(realpath "${1:-.venv}")
PY="$VENV/bin/python"
WS=build/interfaces/$(basename "$VENV")  # one build per venv (distribution)

source scripts/wheels_env.sh
CMAKE_ARGS=(-DBUILD_TESTING=OFF -DPython3_EXECUTABLE="$PY" -DCMAKE_INSTALL_RPATH="$VENV/lib")
# numpy's headers by the wheels' link: CMake refuses to export an include folder inside the
# source folder, which a venv in the checkout is.
[ -z "$WHEELS_NUMPY_INCLUDE" ] || CMAKE_ARGS+=(-DPython3_NumPy_INCLUDE_DIR="$WHEELS_NUMPY_INCLUDE")
"$PY" -m colcon --log-base "$WS/log" build \
  --base-paths . --build-base "$WS/build" --install-base "$WS/install" --merge-install \
  --event-handlers console_cohesion- console_stderr- --cmake-args "${CMAKE_ARGS[@]}"

# -P: the installed package, not a dreamzero_ros/ folder of the current directory.
PKG=$("$PY" -P -c 'import dreamzero_ros, pathlib; print(pathlib.Path(dreamzero_ros.__file__).parent)')
# lib/python3.X/site-packages, or local/lib/python3.X/dist-packages (Humble on Ubuntu)
GENERATED=$(find "$WS/install" -path '*-packages/dreamzero_ros' -type d | head -n 1)
rm -rf "$PKG/msg" "$PKG/action" "$PKG"/dreamzero_ros_s__*
for kind in msg action; do
  mkdir "$PKG/$kind" && cp "$GENERATED/$kind"/*.py "$PKG/$kind/"
done
cp "$GENERATED"/dreamzero_ros_s__*.so "$PKG/"
cp -P "$WS/install/lib"/libdreamzero_ros__*.so "$VENV/lib/"
"$PY" -P -c 'from dreamzero_ros.msg import ActionChunk, PolicyStatus; from dreamzero_ros.action import RunTask' \
  && echo "build_interfaces: dreamzero_ros messages and actions added to $PKG"
