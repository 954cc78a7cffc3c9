#!/usr/bin/env bash
# Builds vkstats (vkstats.c) here into DEST (default .devcarry/vkstats), with the test bed root's
# spirv-as and the trixie loader and libraries it needs (run as DEST/ld-linux-x86-64.so.2
# --library-path DEST DEST/spirv-as: the lent machine's own libc is older), and packs it into
# .devcarry/vkx/vkstats.tar.xz (2 MiB: small enough to carry beside devcarry's first part, where
# the 6.5 MiB folder is not; device_regs.sh unpacks it).
#   bash lab/coopmat_ceiling/build_vkstats.sh [DEST]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
dest=$(realpath -m "${1:-$top/.devcarry/vkstats}")
root=${SMX_ROOT:-/var/tmp/smx-trixie}
mkdir -p "$dest"
gcc -O1 -std=c11 -I"$root/usr/include" "$here/vkstats.c" -l:libvulkan.so.1 -o "$dest/vkstats"
for f in lib64/ld-linux-x86-64.so.2 lib/x86_64-linux-gnu/libc.so.6 lib/x86_64-linux-gnu/libm.so.6 \
         lib/x86_64-linux-gnu/libstdc++.so.6 lib/x86_64-linux-gnu/libgcc_s.so.1 usr/bin/spirv-as; do
  cp -L "$root/$f" "$dest/"
done
mkdir -p "$top/.devcarry/vkx"
tar -cJf "$top/.devcarry/vkx/vkstats.tar.xz" -C "$(dirname "$dest")" "$(basename "$dest")"
ls "$dest" "$top/.devcarry/vkx"
