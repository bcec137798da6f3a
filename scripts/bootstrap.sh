#!/usr/bin/env bash
# Set up everything on a fresh machine: a venv (default .venv) with torch, this package, its
# messages and ROS 2, and .venv-openpi (the reference openpi-client, which needs numpy<2, for the
# bridge tests).
#
# ROS 2 comes from one place only (one rclpy, never two):
# - a sourced ROS 2 install (`source /opt/ros/<distro>/setup.bash`), when its rclpy imports with
#   the Python the venv is made from: the venv then sees it (--system-site-packages, and the
#   install's PYTHONPATH), and the messages are built with that install's rosidl and ament;
# - otherwise the ROS 2 PyPI wheels of ROS_DISTRO (jazzy, the default, or kilted), from
#   requirements-ros-wheels-<distro>.txt (Python 3.11: the wheels' and the local torch wheel's).
#
# Environment: ROS_DISTRO (jazzy|kilted, for the wheels), VENV (default .venv), PYTHON (the
# interpreter the venv is made from; default python3.11, else python3).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}

# The Python to build the venv from: the one that imports a sourced install's rclpy, if any.
if [ -n "${PYTHON:-}" ]; then candidates=("$PYTHON"); else candidates=(python3.11 python3); fi
PYTHON='' SOURCE=wheels
for candidate in "${candidates[@]}"; do
  command -v "$candidate" >/dev/null || continue
  PYTHON=${PYTHON:-$candidate}
  if "$candidate" -c 'import rclpy' 2>/dev/null; then
    PYTHON=$candidate SOURCE=install
    break
  fi
done
if [ -z "$PYTHON" ]; then
  echo "bootstrap: no Python found (tried ${candidates[*]}); set PYTHON" >&2
  exit 1
fi
if [ "$SOURCE" = wheels ] && [ -n "${AMENT_PREFIX_PATH:-}" ]; then
  echo "bootstrap: a ROS 2 install is sourced (AMENT_PREFIX_PATH=$AMENT_PREFIX_PATH) but its" \
    "rclpy does not import with ${candidates[*]}; set PYTHON to the install's Python" \
    "(Humble: python3.10; Jazzy, Kilted: python3.12), or use a shell without it sourced" >&2
  exit 1
fi

if [ "$SOURCE" = install ]; then
  DISTRO=${ROS_DISTRO:-unknown}
  RCLPY=$("$PYTHON" -c 'import os, rclpy; print(os.path.dirname(rclpy.__file__))')
  echo "bootstrap: ROS 2 $DISTRO from the sourced install (rclpy in $RCLPY), $PYTHON"
  # The install's message modules are compiled against its numpy 1.x (Humble 1.21, Jazzy 1.26).
  ROS_REQUIREMENTS=('numpy<2')
  VENV_OPTIONS=(--system-site-packages)
else
  DISTRO=${ROS_DISTRO:-jazzy}
  if [ ! -f "requirements-ros-wheels-$DISTRO.txt" ]; then
    echo "bootstrap: no ROS 2 wheels for ROS_DISTRO=$DISTRO (jazzy or kilted); for another" \
      "distribution source its install first (README, 'On a robot workstation')" >&2
    exit 1
  fi
  if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
    echo "bootstrap: the ROS 2 wheels are built for Python 3.11; $PYTHON is not (set PYTHON)" >&2
    exit 1
  fi
  echo "bootstrap: ROS 2 $DISTRO from its PyPI wheels (requirements-ros-wheels-$DISTRO.txt)," \
    "$PYTHON"
  ROS_REQUIREMENTS=(-r "requirements-ros-wheels-$DISTRO.txt")
  VENV_OPTIONS=()
fi

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "${VENV_OPTIONS[@]}" "$VENV"
fi
# One rclpy: a venv made earlier from another source or distribution is not mixed with this one.
# Both wheel sets install the wheel ros-rclpy (Jazzy's ros-jazzy-rclpy requires ros-rclpy 7.x);
# its major version names the distribution (Jazzy 7, Kilted 9); a sourced install uses none.
"$VENV/bin/python" -c '
import importlib.metadata, sys, sysconfig
wanted = {"wheels:jazzy": "7", "wheels:kilted": "9"}.get(sys.argv[1])
venv = [sysconfig.get_paths()["purelib"]]
found = [d.version for d in importlib.metadata.distributions(path=venv)
         if d.metadata["Name"].lower().replace("_", "-") == "ros-rclpy"]
if found and found[0].split(".")[0] != wanted:
    sys.exit(f"bootstrap: {sys.prefix} holds the wheel ros-rclpy {found[0]}, not ROS 2 from"
             f" {sys.argv[1]}: remove that venv, or choose another with VENV=...")
' "$SOURCE:$DISTRO"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -r requirements.txt "${ROS_REQUIREMENTS[@]}" \
  -r requirements-dev.txt
"$VENV/bin/python" -m pip install -q -e .
scripts/build_interfaces.sh "$VENV"

if [ ! -x .venv-openpi/bin/python ]; then
  "$PYTHON" -m venv .venv-openpi
fi
.venv-openpi/bin/python -m pip install -q -r requirements-openpi-client.txt
echo "bootstrap: $VENV (ROS 2 $DISTRO from the $SOURCE) and .venv-openpi ready"
