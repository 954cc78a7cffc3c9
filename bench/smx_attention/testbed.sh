#!/usr/bin/env bash
# A local test bed for subgroup-matrix WGSL on a machine without a GPU. Chromium here falls back to
# SwiftShader (no subgroup matrices) and Debian 12's Mesa 25.0 lavapipe lacks
# VK_KHR_cooperative_matrix; Mesa >= 25.1's lavapipe has it (f16 x f16 -> f32 at 8x8x8, subgroup
# size 8), and Dawn's Node bindings (npm `webgpu`, dawn.node) turn it into
# chromium-experimental-subgroup-matrix under the toggle allow_unsafe_apis. So: a Debian trixie
# root (debootstrap) with mesa-vulkan-drivers from trixie-backports, Node and `webgpu`, the
# checkout bind-mounted at /work inside it. Needs root and Debian's and npm's registries.
#
#   bash bench/smx_attention/testbed.sh setup                 # once: ~3 min, ~700 MB in $SMX_ROOT
#   bash bench/smx_attention/testbed.sh check [jobs.py build options]   # build, run, judge
#   bash bench/smx_attention/testbed.sh check --cases quick --kernel varlen_bwd.smx   # another kernel
#     (the job file records the kernel: judge takes its interface's cases and outputs from there)
#   bash bench/smx_attention/testbed.sh node ARGS...          # node in the root, cwd bench/smx_attention
# SMX_ROOT: where the root lives (default /var/tmp/smx-trixie).
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
node)
  shift
  in_root bash -c 'cd /work/bench/smx_attention && WEBGPU_MODULE=/opt/dawn/node_modules/webgpu/index.js exec node --no-warnings "$@"' _ "$@"
  ;;
check)
  shift
  mkdir -p "$here/out"
  py=${PYTHON:-$top/.venv/bin/python}
  "$py" "$here/jobs.py" build "$here/out/testbed_jobs.json" --configs 8x8x8 --subgroup 8 --storage 32768 "$@"
  "$0" node testbed.mjs out/testbed_jobs.json out/testbed_results.json
  "$py" "$here/jobs.py" judge "$here/out/testbed_jobs.json" "$here/out/testbed_results.json"
  ;;
*)
  sed -n '2,15p' "$0"
  exit 2
  ;;
esac
