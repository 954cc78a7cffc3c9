#!/usr/bin/env bash
# On the lent machine (after devcarry's calls 1-3 and, carried beside them, vkstats: build_vkstats.sh):
# the registers and workgroup memory NVIDIA's compiler gives each kernel, from the SPIR-V Dawn
# dumps in Chromium (robustness on), one JSON line a module in $OUT/stats.jsonl.
#   python3 -m bench.devcarry run -- bash lab/coopmat_ceiling/device_regs.sh "flash_fwd.smx varlen_bwd.smx" "4,16,2048,64"
set -u
export PYTHONUNBUFFERED=1
kernels=$1
shapes=${2:-2,16,4096,128;4,16,2048,64}
out=${OUT:-/tmp/device_regs}; mkdir -p "$out"; w=$(mktemp -d)
tools=${VKSTATS:-$PWD/.devcarry/vkstats}
[ -x "$tools/vkstats" ] || tar -xJf .devcarry/vkx/vkstats.tar.xz -C "$(dirname "$tools")"
for k in $kernels; do
  python3 -m bench.suite --runtimes=chromium --kernels="$k" --shapes "$shapes" --passes=checked \
    --no-live --rounds=5 --warmup-s=0.1 --repeat=1 --dawn=vulkan_enable_f16_on_nvidia,allow_unsafe_apis,dump_shaders \
    --chromium-arg=--enable-logging=stderr --chromium-arg=--v=1 --budget-s=60 --out="$w/$k" > "$w/$k.log" 2>&1
  python3 lab/coopmat_ceiling/spirv_stats.py "$k" "$w/$k/chromium-checked.log" "$tools" "$w/spv" >> "$out/stats.jsonl" 2> "$w/$k.err"
  tail -c 300 "$w/$k.err"
done
python3 - "$out/stats.jsonl" <<'PY'
import json, sys
for ln in open(sys.argv[1]):
    r = json.loads(ln)
    st = r.get("stats") or {}
    print(r["label"], r["module"], "invocations", r["local_size"][0], "registers", st.get("Register Count"),
          "workgroup bytes", st.get("Shared Memory Size"), r.get("error", ""))
PY
tar czf "$out/spv.tgz" -C "$w" spv
