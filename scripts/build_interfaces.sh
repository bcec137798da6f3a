#!/usr/bin/env bash
# Build the package's interfaces (msg/*.msg, action/*.action) with rosidl from the ROS 2 PyPI
# wheels of a venv (default .venv) and add them to the dreamzero_ros that pip installed there:
# the generated Python modules (dreamzero_ros.msg, dreamzero_ros.action) beside the installed
# package, in place for `pip install -e .` as a compiled extension would be, and their libraries
# in the venv's lib/, where the wheels' loader finds them. With a ROS 2 install, colcon builds the
# whole package instead (README).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(realpath "${1:-.venv}")
PY="$VENV/bin/python"
WS=build/interfaces

# The wheels' CMake targets name include folders of the machine that built them; point those at
# this interpreter's headers and numpy's (needs write access to /opt, as root in CI).
read -r PY_INCLUDE NP_INCLUDE < <("$PY" -c \
  'import numpy, sysconfig; print(sysconfig.get_paths()["include"], numpy.get_include())')
BUILT_ON=/opt/python/cp311-cp311
mkdir -p "$BUILT_ON/include" "$BUILT_ON/lib/python3.11/site-packages/numpy/_core"
ln -sfn "$PY_INCLUDE" "$BUILT_ON/include/python3.11"
ln -sfn "$NP_INCLUDE" "$BUILT_ON/lib/python3.11/site-packages/numpy/_core/include"

export AMENT_PREFIX_PATH="$VENV" CMAKE_PREFIX_PATH="$VENV" PATH="$VENV/bin:$PATH"
# numpy's headers by that link too: CMake refuses to export an include folder inside the source
# folder, which a venv in the checkout is.
"$VENV/bin/colcon" --log-base "$WS/log" build \
  --base-paths . --build-base "$WS/build" --install-base "$WS/install" --merge-install \
  --event-handlers console_cohesion- console_stderr- \
  --cmake-args -DBUILD_TESTING=OFF -DPython3_EXECUTABLE="$PY" \
    -DPython3_NumPy_INCLUDE_DIR="$BUILT_ON/lib/python3.11/site-packages/numpy/_core/include"

# -P: the installed package, not a dreamzero_ros/ folder of the current directory.
PKG=$("$PY" -P -c 'import dreamzero_ros, pathlib; print(pathlib.Path(dreamzero_ros.__file__).parent)')
GENERATED=$(echo "$WS"/install/lib/python3*/site-packages/dreamzero_ros)
rm -rf "$PKG/msg" "$PKG/action" "$PKG"/dreamzero_ros_s__*
for kind in msg action; do
  mkdir "$PKG/$kind" && cp "$GENERATED/$kind"/*.py "$PKG/$kind/"
done
cp "$GENERATED"/dreamzero_ros_s__*.so "$PKG/"
cp -P "$WS/install/lib"/libdreamzero_ros__*.so "$VENV/lib/"
"$PY" -P -c 'from dreamzero_ros.msg import ActionChunk, PolicyStatus; from dreamzero_ros.action import RunTask' \
  && echo "build_interfaces: dreamzero_ros messages and actions added to $PKG"
