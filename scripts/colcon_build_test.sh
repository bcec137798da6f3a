#!/usr/bin/env bash
# colcon build and colcon test of the package as a ROS 2 workspace holds it (the package in src/,
# a plain `colcon build` at the workspace root), with the ROS 2 of the given venv (default .venv;
# its PyPI wheels stand in for a sourced ROS 2 install). The package is this checkout, or the
# folder given second (CI: a fresh clone, without the files bootstrap generates in place).
# Usage: scripts/colcon_build_test.sh [VENV] [PACKAGE_FOLDER]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(realpath "${1:-.venv}")
PACKAGE=$(realpath "${2:-.}")
source scripts/wheels_env.sh
WS=$PWD/build/colcon_ws/$(basename "$VENV")  # one workspace per venv (distribution)
mkdir -p "$WS/src"
ln -sfn "$PACKAGE" "$WS/src/dreamzero_ros"
cd "$WS"
colcon list
colcon build --event-handlers console_cohesion- console_stderr-
colcon test --event-handlers console_cohesion-
colcon test-result --verbose
