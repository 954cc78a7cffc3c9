#!/usr/bin/env bash
# Sets up wgpu-py on a lent NVIDIA machine (no package registry there) and runs the command given:
#   bash bench/device.sh python3 -m wgattn.cli bench ...
# Needs .devcarry/ (ignored, carried): whl/ with wgpu, cffi, pycparser, rendercanvas wheels for
# Python 3.12; libvulkan1_*.deb (apt-get download libvulkan1); nvidia-vulkan-env.sh from shared/scripts.
set -euo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .devcarry/whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/py PYTHONUNBUFFERED=1
# shellcheck disable=SC1090
source .devcarry/nvidia-vulkan-env.sh .devcarry/libvulkan1_*.deb >&2
exec "$@"
