#!/usr/bin/env bash
# One device call (burst S1), inside bench/devcarry.py's environment (the Vulkan loader, NVIDIA's
# ICD, the carried Chromium and Pyodide):
#   python3 bench/devcarry.py run -- bash lab/coopmat_ceiling/device.sh
# carrying .devcarry/coopmat (build.sh). About 4.5 minutes:
#   1. NVIDIA's sample, warm: each variant timed at 4096^3, then its C checked (--correctness, 256^3),
#      100 products a figure, its three f16 x f16 -> f32 fragment shapes at 128 x 128 (B row-major;
#      the shipped and rebuilt shaders with B column-major too; the shipped one first and last:
#      the clocks' drift) (~50 s);
#   2. gemm.smx's sweep in Chromium, robustness on and off (bench/suite.py --gemm sweep) (~170 s,
#      at most 260);
#   3. the SPIR-V Tint emits there for two tiles (Dawn's dump_shaders) (~30 s);
#   4. the table (summary.py): $OUT/summary.json, printed last.
# $OUT: sample.txt (the runner's output), gemm.jsonl, suite_report.json, spirv_h100.txt,
# summary.json, device.log.
set -uo pipefail
out=${OUT:?set OUT}
vk=$(realpath "${VKCM_DIR:-.devcarry/coopmat}")
here=$(cd "$(dirname "$0")" && pwd)
log() { echo "[$(date +%T) +${SECONDS}s] $*" | tee -a "$out/device.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >> "$out/device.log" 2>&1
variants=$(ls "$vk/variants" | grep -v -x shipped)
both="16x16x16 128x128,16x8x16 128x128,16x8x8 128x128"  # B row- and column-major
rows="16x16x16 128x128 0,16x8x16 128x128 0,16x8x8 128x128 0"  # B row-major: the sample's fastest
sample() {  # variant, cases, runner args...
  local v=$1 cases=$2; shift 2
  echo "=== variant $v $*"
  (cd "$vk/variants/$v" && VKCM_ONLY=shmemfp16_fp32 VKCM_CASE="$cases" VKCM_REPEAT=100 timeout 120 "$vk/vk_cooperative_matrix_perf" "$@" 2>&1 \
    | grep -v -e "^specdata" -e "^$" )
}
log "warming the GPU (3 s of f16 matmul)"
python3 -c "import torch,time;a=torch.randn(8192,8192,device='cuda',dtype=torch.half);t=time.time()
while time.time()-t<3: a@a
torch.cuda.synchronize()" >> "$out/device.log" 2>&1 || log "no torch warm-up"
log "1. the sample: every variant timed, then checked"
{
  sample shipped "$both"
  sample sample "$both"
  for v in $variants; do [ "$v" = sample ] || sample "$v" "$rows"; done
  sample shipped "$both"
  for v in shipped $variants; do sample "$v" "$both" --correctness; done
} > "$out/sample.txt" 2>&1
log "sample done: $(grep -c TFlops "$out/sample.txt") figures, $(grep -c -w fail "$out/sample.txt") failed checks"
log "2. gemm.smx's sweep in Chromium, robustness on and off"
tmp=$(mktemp -d)
python3 -m bench.suite --runtimes=chromium --kernels= --gemm=sweep --no-live --rounds=10 --warmup-s=1 --repeat=1 \
  --budget-s=260 --out="$tmp/suite" > "$tmp/suite.log" 2>&1
tail -n 60 "$tmp/suite.log" >> "$out/device.log"
cp "$tmp/suite/gemm.jsonl" "$out/gemm.jsonl" 2>/dev/null || log "no gemm.jsonl: $(tail -n 5 "$tmp/suite.log")"
cp "$tmp/suite/report.json" "$out/suite_report.json" 2>/dev/null
log "3. the SPIR-V Dawn makes there for two tiles (dump_shaders, robustness on)"
python3 -m bench.suite --runtimes=chromium --kernels= --gemm="$here/s2_dump_tiles.json" --passes=checked --no-live --rounds=5 \
  --warmup-s=0.1 --repeat=1 --dawn=vulkan_enable_f16_on_nvidia,allow_unsafe_apis,dump_shaders \
  --chromium-arg=--enable-logging=stderr --chromium-arg=--v=1 --budget-s=60 --out="$tmp/dump" > "$tmp/dump.log" 2>&1
python3 - "$tmp/dump/chromium-checked.log" "$out/spirv_h100.txt" <<'PY'
import os, sys
# bench/cdp.py keeps Chromium's output in that log (Playwright, where installed, does not)
text = open(sys.argv[1], errors="replace").read() if os.path.exists(sys.argv[1]) else ""
at = text.find("Dumped SPIRV")
part = text[max(0, at - 2000):] if at >= 0 else "no 'Dumped SPIRV' in Chromium's log; its end:\n" + text[-20000:]
open(sys.argv[2], "w").write(part[: 15 << 20])
print(f"spirv_h100.txt: {len(part)} characters; dumps found: {text.count('Dumped SPIRV')}")
PY
log "4. summary"
python3 "$here/summary.py" "$out"
log "done"
