#!/usr/bin/env bash
# Conformance of a registered kernel on real subgroup matrices, on a machine without a GPU.
# Chromium here falls back to SwiftShader (no subgroup matrices) and Debian 12's lavapipe lacks
# VK_KHR_cooperative_matrix; Mesa >= 25.1's lavapipe has it (f16 x f16 -> f32 at 8x8x8, subgroup
# size 8), and Dawn's Node bindings (npm `webgpu`) turn it into chromium-experimental-subgroup-matrix
# under the toggle allow_unsafe_apis. So: a Debian trixie root (debootstrap) with Mesa 26 from
# trixie-backports, Node and `webgpu`; the checkout bind-mounted at /work inside it runs the page's
# own WebGPU code (testbed.mjs); the repo's .venv plans and judges outside it (jobs.py).
#
#   bash bench/smx_testbed/testbed.sh setup       # once, as root: ~3 min, ~700 MB in $SMX_ROOT
#   bash bench/smx_testbed/testbed.sh check [--kernel ID] [--cases quick] [--template FILE.wgsl] [--tpr N]
#   bash bench/smx_testbed/testbed.sh target               # only the device: out/target.json
#   bash bench/smx_testbed/testbed.sh run JOBS.json RESULTS.json   # a job file built elsewhere (in out/)
#
# check: the device as the page sees it, the kernel's cases planned for it, run, judged by the
# kernel's precision rule; exits 1 if any output fails. Files in bench/smx_testbed/out/.
# SMX_ROOT: where the root lives (default /var/tmp/smx-trixie); PYTHON: default the repo's .venv.
set -euo pipefail
root=${SMX_ROOT:-/var/tmp/smx-trixie}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
WEBGPU_NPM=webgpu@0.6.2

in_root() {  # run a command in the root with the checkout at /work (mounts private to this call)
  unshare --mount --propagation private /bin/bash -s "$root" "$top" "$@" <<'EOS'
root=$1; top=$2; shift 2
mount --bind /proc "$root/proc" && mount --bind /dev "$root/dev" && mkdir -p "$root/work" && mount --bind "$top" "$root/work"
exec chroot "$root" /usr/bin/env XDG_RUNTIME_DIR=/tmp HOME=/root PATH=/usr/local/bin:/usr/bin:/bin "$@"
EOS
}

node_in_root() {  # node testbed.mjs ARGS... in the root, paths relative to bench/smx_testbed
  in_root bash -c 'cd /work/bench/smx_testbed && WEBGPU_MODULE=/opt/dawn/node_modules/webgpu/index.js exec node --no-warnings testbed.mjs "$@"' _ "$@"
}

case "${1:-}" in
setup)
  command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >/dev/null
  [ -x "$root/usr/bin/apt-get" ] || debootstrap --variant=minbase trixie "$root" http://deb.debian.org/debian >/dev/null
  echo "deb http://deb.debian.org/debian trixie-backports main" > "$root/etc/apt/sources.list.d/backports.list"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  in_root bash -c "apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q -t trixie-backports mesa-vulkan-drivers >/dev/null \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs >/dev/null"
  # npm here (it knows this machine's certificates); dawn.node itself runs in the root
  mkdir -p "$root/opt/dawn" && npm install -q --no-save --prefix "$root/opt/dawn" "$WEBGPU_NPM" >/dev/null
  in_root bash -c 'dpkg-query -W mesa-vulkan-drivers nodejs; ls /opt/dawn/node_modules/webgpu/dist/linux-x64/dawn.node'
  ;;
check)
  shift
  [ -x "$root/usr/bin/node" ] || { echo "testbed: no root at $root: run 'bash $0 setup' first (as root)" >&2; exit 2; }
  py=${PYTHON:-$top/.venv/bin/python}
  mkdir -p "$here/out"
  export PYTHONPATH="$top${PYTHONPATH:+:$PYTHONPATH}"  # bench.smx_testbed from here; --template FILE from the caller's folder
  node_in_root target out/target.json
  "$py" -m bench.smx_testbed.jobs build "$here/out/target.json" "$here/out/jobs.json" "$@"
  node_in_root run out/jobs.json out/results.json
  "$py" -m bench.smx_testbed.jobs judge "$here/out/jobs.json" "$here/out/results.json"
  ;;
target | run)
  [ -x "$root/usr/bin/node" ] || { echo "testbed: no root at $root: run 'bash $0 setup' first (as root)" >&2; exit 2; }
  mkdir -p "$here/out"
  if [ "$1" = target ]; then node_in_root target out/target.json; else node_in_root run "out/$(basename "$2")" "out/$(basename "$3")"; fi
  ;;
*)
  sed -n '2,18p' "$0"
  exit 2
  ;;
esac
