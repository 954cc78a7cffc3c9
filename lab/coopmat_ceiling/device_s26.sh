#!/usr/bin/env bash
# S26 on the lent machine (after devcarry's calls 1-3, vkstats carried beside the first):
# varlen_bwd.smx's tiles under the workgroup-memory step beside the registered ones: registers,
# time at both benchmark shapes (every row twice), the varlen_bwd grid on the candidates alone.
set -u
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp/s26}; mkdir -p "$out"; w=$(mktemp -d)
t0=$(date +%s)
python3 -m lab.coopmat_ceiling.fwd_candidates apply --set s26
OUT="$out" bash lab/coopmat_ceiling/device_regs.sh "varlen_bwd.smx_r4d2n1 varlen_bwd.smx_r2d2n1"
python3 -m bench.suite --runtimes chromium --kernels "$(python3 -m lab.coopmat_ceiling.fwd_candidates kernels --set s26)" \
  --repeat 2 --no-live --out "$w/bwd" --budget-s 250 > "$out/bwd.log" 2>&1
echo "bwd exit $? after $(( $(date +%s) - t0 )) s"
grep -E "error|FAIL|unavailable" "$out/bwd.log" | grep -v dbus | cut -c1-300 | head -8
tail -n 16 "$w/bwd/table.txt"
cp "$w/bwd/records.json" "$out/bwd-records.json" 2>/dev/null
python3 - <<'PY'
import json
p = "shaders/manifest.json"
m = json.load(open(p))
keep = ("varlen_bwd.smx_r4d2n1", "varlen_bwd.smx_r2d2n1")
for k in [k for k, e in m["kernels"].items() if e["interface"] == "varlen_bwd" and k not in keep]:
    del m["kernels"][k]
json.dump(m, open(p, "w"), indent=2)
PY
python3 -m bench.suite --kernels= --runtimes chromium --grid varlen_bwd --no-live --out "$w/grid" > "$out/grid.log" 2>&1
echo "grid exit $? after $(( $(date +%s) - t0 )) s"
grep -E "grid |FAIL" "$out/grid.log" | cut -c1-400 | head -20
