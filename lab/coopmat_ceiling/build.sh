#!/usr/bin/env bash
# What device.sh runs besides the repo, built here into DEST (default .devcarry/coopmat; carry it):
# NVIDIA's vk_cooperative_matrix_perf (MIT, LICENSE.vk_cooperative_matrix_perf) with runner.patch
# (VKCM_ONLY: shaders whose file name has it; VKCM_REPEAT: products per figure; VKCM_CASE: the
# cases "MxNxK TILE_MxTILE_N BColMajor" starting with one of its comma-separated prefixes), and
# its f16 -> f32 shader as shipped and in variants (variants.sh).
#   bash lab/coopmat_ceiling/build.sh [DEST]
# Needs: g++ (Debian 12: the binary runs on the lent machine), the sample's source (VKCM_SRC: a
# checkout, else the bare mirror VKCM_GIT), Vulkan headers with the KHR cooperative-matrix types
# (VULKAN_INCLUDE; Debian 12's 1.3.239 lack them: trixie's libvulkan-dev in the test bed's root),
# the shipped shader (VKCM_SHIPPED) and the test bed's root for glslang and spirv-tools.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
dest=$(realpath -m "${1:-$top/.devcarry/coopmat}")
git_src=${VKCM_GIT:-/work/.mirror/jeffbolznv+vk_cooperative_matrix_perf/repo}
include=${VULKAN_INCLUDE:-${SMX_ROOT:-/var/tmp/smx-trixie}/usr/include}
shipped=${VKCM_SHIPPED:-/work/shared/scripts/coopmat-ceiling/shaders/shmemfp16_fp32.spv}
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
if [ -n "${VKCM_SRC:-}" ]; then cp -r "$VKCM_SRC"/. "$src"; else git -C "$git_src" archive HEAD | tar -x -C "$src"; fi
patch -s -d "$src" -p1 < "$here/runner.patch"
mkdir -p "$dest"
g++ -O2 -std=c++17 -I"$include" "$src/src/vk_cooperative_matrix_perf.cpp" -l:libvulkan.so.1 -o "$dest/vk_cooperative_matrix_perf"
cp "$here/LICENSE.vk_cooperative_matrix_perf" "$dest/"
# variants.sh writes inside this checkout (the bed's root sees only it), then they move to DEST
rm -rf "$here/out/variants"
bash "$here/variants.sh" "$here/out/variants" >/dev/null
mkdir -p "$here/out/variants/shipped/shaders"
cp "$shipped" "$here/out/variants/shipped/shaders/shmemfp16_fp32.spv"
rm -rf "$dest/variants"
cp -r "$here/out/variants" "$dest/variants"
ls "$dest" "$dest/variants"
du -sh "$dest"
