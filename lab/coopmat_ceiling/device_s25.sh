#!/usr/bin/env bash
# S25 on the lent machine (after devcarry's calls 1-3, vkstats carried beside the first): flash_fwd.smx
# on the 16x8x16 and 16x8x8 fragment shapes beside 16x16x16, at (4,16,2048,64): registers, time
# (every row twice), then the flash_fwd grid on the two alone. The plan takes the adapter's first
# f16 -> f32 configuration; this copy of the tree's registry gives the two candidate ids theirs.
set -u
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp/s25}; mkdir -p "$out"; w=$(mktemp -d)
t0=$(date +%s)
python3 -m lab.coopmat_ceiling.fwd_candidates apply --set s25
python3 - <<'PY'
from pathlib import Path
p = Path("py/wgattn/registry.py")
old = "        config = target.matrix(*self.matrix)\n"
new = old + (
    "        want = {'flash_fwd.smx_c16816': (16, 8, 16), 'flash_fwd.smx_c1688': (16, 8, 8)}.get(self.id)\n"
    "        if want:\n"
    "            config = next((c for c in target.matrix_configs if (c.m, c.n, c.k) == want and (c.component, c.result) == self.matrix), None)\n"
)
text = p.read_text()
assert text.count(old) == 1
p.write_text(text.replace(old, new))
PY
OUT="$out" bash lab/coopmat_ceiling/device_regs.sh "flash_fwd.smx_c16816 flash_fwd.smx_c1688" "4,16,2048,64"
python3 -m bench.suite --runtimes chromium --kernels "$(python3 -m lab.coopmat_ceiling.fwd_candidates kernels --set s25)" \
  --shapes 4,16,2048,64 --repeat 2 --no-live --out "$w/fwd" --budget-s 200 > "$out/fwd.log" 2>&1
echo "fwd exit $? after $(( $(date +%s) - t0 )) s"
grep -E "error|FAIL|unavailable" "$out/fwd.log" | grep -v dbus | cut -c1-300 | head -8
tail -n 12 "$w/fwd/table.txt"
cp "$w/fwd/records.json" "$out/fwd-records.json" 2>/dev/null
python3 - <<'PY'
import json
p = "shaders/manifest.json"
m = json.load(open(p))
keep = ("flash_fwd.smx_c16816", "flash_fwd.smx_c1688")
for k in [k for k, e in m["kernels"].items() if e["interface"] == "flash_fwd" and k not in keep]:
    del m["kernels"][k]
json.dump(m, open(p, "w"), indent=2)
PY
python3 -m bench.suite --kernels= --runtimes chromium --grid flash_fwd --no-live --out "$w/grid" > "$out/grid.log" 2>&1
echo "grid exit $? after $(( $(date +%s) - t0 )) s"
grep -E "grid |FAIL" "$out/grid.log" | cut -c1-400 | head -20
