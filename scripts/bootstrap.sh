#!/usr/bin/env bash
# Set up everything on a fresh machine: .venv (torch CPU wheel, ROS 2 Kilted wheels, this package)
# and .venv-openpi (the reference openpi-client, which needs numpy<2, for the bridge tests).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -r requirements.txt -r requirements-ros-wheels.txt -r requirements-dev.txt
.venv/bin/python -m pip install -q -e .
scripts/build_interfaces.sh .venv

if [ ! -x .venv-openpi/bin/python ]; then
  "$PYTHON" -m venv .venv-openpi
fi
.venv-openpi/bin/python -m pip install -q -r requirements-openpi-client.txt
echo "bootstrap: .venv and .venv-openpi ready"
