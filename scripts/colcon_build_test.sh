#!/usr/bin/env bash
# colcon build of both packages (messages and the ament_python package) and colcon test of the
# package's own checks, with the ROS 2 PyPI wheels of the given venv (default .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(realpath "${1:-.venv}")
export AMENT_PREFIX_PATH="$VENV" CMAKE_PREFIX_PATH="$VENV" PATH="$VENV/bin:$PATH"
WS=build/colcon
colcon --log-base "$WS/log" build \
  --base-paths . interfaces/dreamzero_ros_interfaces \
  --build-base "$WS/build" --install-base "$WS/install" \
  --event-handlers console_cohesion- console_stderr- \
  --cmake-args -DBUILD_TESTING=OFF -DPython3_EXECUTABLE="$VENV/bin/python"
colcon --log-base "$WS/log" test \
  --base-paths . --packages-select dreamzero_ros \
  --build-base "$WS/build" --install-base "$WS/install" \
  --event-handlers console_cohesion- \
  --pytest-args test/test_package_manifest.py test/test_package_lint.py
colcon --log-base "$WS/log" test-result --test-result-base "$WS/build" --verbose
