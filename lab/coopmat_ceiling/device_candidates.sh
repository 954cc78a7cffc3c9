#!/usr/bin/env bash
# On the lent machine (after devcarry's calls 1-3, vkstats carried beside the first): a candidate
# set of fwd_candidates.py beside its registered kernels: each candidate's registers (device_regs.sh),
# the time (every row twice), then INTERFACE's conformance grid in Chromium on the candidates alone.
#   python3 -m bench.devcarry run -- bash lab/coopmat_ceiling/device_candidates.sh SET INTERFACE [SHAPES]
set -u
export PYTHONUNBUFFERED=1
set_name=$1
interface=$2
shapes=${3:-2,16,4096,128;4,16,2048,64}
out=${OUT:-/tmp/device_candidates}; mkdir -p "$out"; w=$(mktemp -d)
t0=$(date +%s)
python3 -m lab.coopmat_ceiling.fwd_candidates apply --set "$set_name"
all=$(python3 -m lab.coopmat_ceiling.fwd_candidates kernels --set "$set_name")
mine=$(python3 - "$set_name" <<'PY'
import sys
from lab.coopmat_ceiling.fwd_candidates import SETS
print(" ".join(SETS[sys.argv[1]]))
PY
)
OUT="$out" bash lab/coopmat_ceiling/device_regs.sh "$mine" "$shapes"
python3 -m bench.suite --runtimes chromium --kernels "$all" --shapes "$shapes" \
  --repeat 2 --no-live --out "$w/time" --budget-s 250 > "$out/time.log" 2>&1
echo "time exit $? after $(( $(date +%s) - t0 )) s"
grep -E "error|FAIL|unavailable" "$out/time.log" | grep -v dbus | cut -c1-300 | head -8
tail -n 16 "$w/time/table.txt"
cp "$w/time/records.json" "$out/records.json" 2>/dev/null
python3 - "$interface" $mine <<'PY'
import json, sys
interface, keep = sys.argv[1], sys.argv[2:]
p = "shaders/manifest.json"
m = json.load(open(p))
for k in [k for k, e in m["kernels"].items() if e["interface"] == interface and k not in keep]:
    del m["kernels"][k]
json.dump(m, open(p, "w"), indent=2)
PY
python3 -m bench.suite --kernels= --runtimes chromium --grid "$interface" --no-live --out "$w/grid" > "$out/grid.log" 2>&1
echo "grid exit $? after $(( $(date +%s) - t0 )) s"
grep -E "grid |FAIL" "$out/grid.log" | cut -c1-400 | head -20
