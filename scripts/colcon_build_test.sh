#!/usr/bin/env bash
# colcon build and colcon test of the package as a ROS 2 workspace holds it (the checkout in
# src/, a plain `colcon build` at the workspace root), with the ROS 2 PyPI wheels of the given
# venv (default .venv) standing in for a sourced ROS 2 install.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(realpath "${1:-.venv}")
# VIRTUAL_ENV: CMake's FindPython takes the venv's interpreter
export AMENT_PREFIX_PATH="$VENV" CMAKE_PREFIX_PATH="$VENV" PATH="$VENV/bin:$PATH" VIRTUAL_ENV="$VENV"
WS=build/colcon_ws
mkdir -p "$WS/src"
ln -sfn ../../.. "$WS/src/dreamzero_ros"
cd "$WS"
colcon list
colcon build --event-handlers console_cohesion- console_stderr-
colcon test --event-handlers console_cohesion-
colcon test-result --verbose
