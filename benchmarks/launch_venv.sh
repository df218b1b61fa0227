#!/usr/bin/env bash
# A scratch venv with ROS 2 launch, launch_ros and ros2cli built from their sources, in which test/test_launch.py
# runs for real (it skips elsewhere: launch_ros, ros2cli and composition_interfaces have no PyPI wheels).
# Not part of the test run, and nothing it fetches goes into the repository.
#
#   bash benchmarks/launch_venv.sh [VENV (default /tmp/launchvenv)] [SOURCES (default /tmp/launchsrc)]
#   PYTHONPATH=$PWD /tmp/launchvenv/bin/python -m pytest -q -p no:cacheprovider test/test_launch.py
#
# The commits are those checked (see docs/lifecycle.md, "Checked with the real launch"): the newest rolling
# snapshot that could be had then, from before ROS 2 Kilted branched (launch 3.7.1, launch_ros 0.28.0, ros2cli
# 0.36.1); the ros-* runtime wheels are Kilted's. Needs git, cmake, g++ and network access to PyPI and GitHub.
# Where GitHub is out of reach, LAUNCH_VENV_GIT names where to clone from instead, {name} standing for the
# repository's name (e.g. LAUNCH_VENV_GIT='/srv/mirror/ros2+{name}/repo'); the same commits are checked out.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${1:-/tmp/launchvenv}"
SOURCES="${2:-/tmp/launchsrc}"
declare -A COMMITS=(
  [launch]=02595bafc7891d4d287667b6aa9161edf738e9f3           # 3.7.1
  [launch_ros]=f9ab9371824d470bca47602bc7d277eb2217c90d       # 0.28.0
  [ros2cli]=e20d2c664fc2981b0b80ebed534e5becc6fdbf34          # 0.36.1
  [rcl_interfaces]=f6b3741d921ef5414125091b2ccc74b863be3c24   # composition_interfaces 2.2.0
  [rosidl_runtime_py]=3327b1dc488af514017c5446ffff12d102bbe94a  # 0.14.0 (for ros2service, ros2param)
)
GITHUB='https://github.com/ros2/{name}.git'
GIT_SOURCE="${LAUNCH_VENV_GIT:-$GITHUB}"
mkdir -p "$SOURCES"
for name in "${!COMMITS[@]}"; do
  if [ ! -d "$SOURCES/$name/.git" ]; then
    git clone -q "${GIT_SOURCE//\{name\}/$name}" "$SOURCES/$name"
  fi
  git -C "$SOURCES/$name" checkout -q "${COMMITS[$name]}"
done

# As .ci/run makes the project's venv: the package with its ros, cpu and test extras, and vision_msgs.
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q -e "$REPO[ros,cpu,test]"
"$VENV/bin/vision-factory" install-vision-msgs

# composition_interfaces (launch_ros imports it): built as install-vision-msgs builds vision_msgs, with its helpers.
"$VENV/bin/python" - "$SOURCES/rcl_interfaces/composition_interfaces" <<'EOF'
import subprocess, sys, tempfile
from pathlib import Path

from vision_factory.tools import interfaces

prefix = Path(sys.prefix)
env = interfaces.build_environment(prefix)
cmake, generator = interfaces.build_tools(env)
build = Path(tempfile.mkdtemp(prefix="composition_interfaces_build_"))
configure = interfaces.configure_command(cmake, generator, Path(sys.argv[1]), build, prefix)
for command in (configure, [cmake, "--build", str(build), "--parallel", "2"], [cmake, "--install", str(build)]):
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
EOF

# Their Python dependencies from PyPI (launch wants lark-parser, which the ros extra already brings), then the
# packages themselves, without dependencies (their setup.py files name none that pip could resolve).
"$VENV/bin/pip" install -q osrf-pycommon argcomplete importlib-resources catkin-pkg
"$VENV/bin/pip" install -q --no-deps \
  "$SOURCES/launch/launch" "$SOURCES/launch/launch_xml" "$SOURCES/launch/launch_yaml" \
  "$SOURCES/launch_ros/launch_ros" "$SOURCES/launch_ros/ros2launch" "$SOURCES/rosidl_runtime_py" \
  "$SOURCES/ros2cli/ros2cli" "$SOURCES/ros2cli/ros2pkg" "$SOURCES/ros2cli/ros2node" "$SOURCES/ros2cli/ros2lifecycle" \
  "$SOURCES/ros2cli/ros2service" "$SOURCES/ros2cli/ros2param" "$SOURCES/ros2cli/ros2topic"
"$VENV/bin/python" -c "import composition_interfaces.srv, launch, launch_ros.actions, ros2lifecycle"
echo "ready: PYTHONPATH=$REPO $VENV/bin/python -m pytest -q -p no:cacheprovider $REPO/test/test_launch.py"
