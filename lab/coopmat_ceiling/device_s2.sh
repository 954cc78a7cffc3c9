#!/usr/bin/env bash
# One device call (burst S2), inside bench/devcarry.py's environment (the carried Chromium and
# Pyodide; the wheel the page installs was packed after `fwd_candidates.py apply`):
#   here, before packing:  python3 -m lab.coopmat_ceiling.fwd_candidates apply
#                          .venv/bin/python -m bench.devcarry pack   (then its stash calls)
#   there:                 PYTHONUNBUFFERED=1 python3 -m bench.devcarry run -- bash lab/coopmat_ceiling/device_s2.sh
#   here, after:           python3 -m lab.coopmat_ceiling.fwd_candidates revert
# Carries nothing (the suite's environment was unpacked by the pack's calls). About 3.5 minutes:
#   1. the GPU warmed (3 s of f16 matmul) (~10 s);
#   2. one suite run in Chromium, robustness on and off (~150 s, at most 230): flash_fwd.smx and its
#      candidates (fwd_candidates.py kernels) at (4,16,2048,64) and (2,16,4096,128) causal, and
#      gemm.smx at 4096^3 on the tiles of s2_tiles.json (each one's C checked before it is timed);
#   3. the SPIR-V Dawn makes on the H100 for two GEMM tiles, robustness on (dump_shaders) (~40 s);
#   4. the table, printed last.
# $OUT (6 files): table.txt (the suite's: flash_fwd and the GEMM), records.json (flash_fwd),
# gemm.jsonl, report.json, spirv_h100.txt, device.log.
set -uo pipefail
out=${OUT:?set OUT}
here=$(cd "$(dirname "$0")" && pwd)
log() { echo "[$(date +%T) +${SECONDS}s] $*" | tee -a "$out/device.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >> "$out/device.log" 2>&1
kernels=$(python3 "$here/fwd_candidates.py" kernels)
if ! grep -q '"flash_fwd.smx_loops"' shaders/manifest.json; then
  log "the candidates are not registered here (fwd_candidates.py apply before packing): flash_fwd.smx alone"
  kernels=flash_fwd.smx
fi
log "1. warming the GPU (3 s of f16 matmul)"
python3 -c "import torch,time;a=torch.randn(8192,8192,device='cuda',dtype=torch.half);t=time.time()
while time.time()-t<3: a@a
torch.cuda.synchronize()" >> "$out/device.log" 2>&1 || log "no torch warm-up"
tmp=$(mktemp -d)
log "2. the suite: $kernels; gemm.smx on $(python3 -c "import json;print(len(json.load(open('$here/s2_tiles.json'))))") tiles"
python3 -m bench.suite --runtimes=chromium --kernels="$kernels" --shapes="4,16,2048,64;2,16,4096,128" \
  --gemm="$here/s2_tiles.json" --passes=checked,trusted --no-live --rounds=10 --warmup-s=1 --repeat=1 \
  --budget-s=230 --out="$tmp/suite" > "$tmp/suite.log" 2>&1
log "suite exit $?: $(grep -c . "$tmp/suite/gemm.jsonl" 2>/dev/null || echo 0) GEMM records"
tail -n 80 "$tmp/suite.log" >> "$out/device.log"
for f in table.txt records.json gemm.jsonl report.json; do cp "$tmp/suite/$f" "$out/" 2>/dev/null || log "no $f"; done
log "3. the SPIR-V Dawn makes for two GEMM tiles (dump_shaders, robustness on)"
python3 -m bench.suite --runtimes=chromium --kernels= --gemm="$here/s2_dump_tiles.json" --passes=checked --no-live \
  --rounds=5 --warmup-s=0.1 --repeat=1 --dawn=vulkan_enable_f16_on_nvidia,allow_unsafe_apis,dump_shaders \
  --chromium-arg=--enable-logging=stderr --chromium-arg=--v=1 --budget-s=60 --out="$tmp/dump" > "$tmp/dump.log" 2>&1
python3 - "$tmp/dump/chromium-checked.log" "$out/spirv_h100.txt" <<'PY'
import os, sys
# bench/cdp.py keeps Chromium's output in that log: the gemm.smx dumps (those with cooperative matrices)
text = open(sys.argv[1], errors="replace").read() if os.path.exists(sys.argv[1]) else ""
dumps = [d for d in text.split("Dumped SPIRV disassembly")[1:] if "OpCooperativeMatrixMulAddKHR" in d]
open(sys.argv[2], "w").write("".join("/* Dumped SPIRV disassembly" + d[:600000] for d in dumps) or text[-20000:])
for i, d in enumerate(dumps):
    body = d.split("OpFunctionEnd")
    print(f"gemm dump {i}: UMin {d.count('UMin')}, OpSelect {d.count('OpSelect')}, loops {d.count('OpLoopMerge')}, "
          f"matrix loads {d.count('OpCooperativeMatrixLoadKHR')}, products {d.count('OpCooperativeMatrixMulAddKHR')}")
PY
log "4. done"
echo
cat "$out/table.txt" 2>/dev/null || tail -n 40 "$tmp/suite.log"
