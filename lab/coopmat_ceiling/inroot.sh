#!/usr/bin/env bash
# Runs a command in the lavapipe test bed's Debian trixie root (bench/smx_testbed/testbed.sh setup
# makes it; `apt-get install spirv-tools glslang-tools` there adds the SPIR-V tools) with this
# checkout at /work and the working directory at the same place inside it.
#   bash lab/coopmat_ceiling/inroot.sh spirv-dis x.spv
set -euo pipefail
root=${SMX_ROOT:-/var/tmp/smx-trixie}
top=$(cd "$(dirname "$0")/../.." && pwd)
rel=$(realpath --relative-to="$top" "$PWD")
case "$rel" in ..*) rel=. ;; esac
unshare --mount --propagation private /bin/bash -s "$root" "$top" "$rel" "$@" <<'EOS'
root=$1; top=$2; rel=$3; shift 3
mount --bind /proc "$root/proc" && mount --bind /dev "$root/dev" && mkdir -p "$root/work" && mount --bind "$top" "$root/work"
cd "$root/work/$rel"
exec chroot "$root" /usr/bin/env XDG_RUNTIME_DIR=/tmp HOME=/root PATH=/usr/local/bin:/usr/bin:/bin \
  WEBGPU_MODULE=/opt/dawn/node_modules/webgpu/index.js /bin/bash -c 'cd "/work/$0" && exec "$@"' "$rel" "$@"
EOS
