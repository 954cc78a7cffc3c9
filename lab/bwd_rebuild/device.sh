#!/usr/bin/env bash
# The rebuilt varlen_bwd.smx's tile candidates, the kernel it replaced and varlen_bwd.tiled, timed
# by the benchmark suite (python -m bench.suite: the protocol) on this machine's GPU, and on
# request the conformance grid in Chromium:
#   1. Chromium, robustness on (REB_PASSES, default "checked"): one suite run per group of
#      `variants groups` (the registered kernel, its loops form varlen_bwd.smx_loops and the candidates in one series);
#   2. natively, wgpu-py trusted and checked: varlen_bwd.tiled and its candidates (`variants native`;
#      REB_NATIVE names others, "" skips);
#   3. only when REB_GRID_S > 0 (default 0): the varlen_bwd conformance grid in Chromium (robustness
#      on), every registered varlen_bwd kernel the adapter runs, the candidates included, judged by
#      the page's Python (which recomputes the float64 and naive f16 references for every
#      kernel and case under Pyodide: minutes for 11 kernels), bounded by REB_GRID_S seconds (a run
#      cut short reports nothing). E.g. REB_STAGES=grid REB_GRID_S=500 in a call of its own.
# REB_STAGES picks stages (default "chromium native grid").
#
# In a tree where `python3 -m lab.bwd_rebuild.variants apply` ran before `python3 -m bench.devcarry
# pack` (the page's wheel must carry the candidates), after devcarry's calls 1-3, in one more call:
#   python3 -m bench.devcarry run -- bash lab/bwd_rebuild/device.sh
# Local dry run (SwiftShader: the smx kernels are skipped as unavailable, the plumbing runs):
#   REB_SHAPES="1,2,64,64" REB_ARGS="--gpu software --rounds 5 --warmup-s 0.2" \
#     PYTHON=.venv/bin/python OUT=/tmp/reb bash lab/bwd_rebuild/device.sh
# Writes $OUT/records.jsonl (every record, its stage added), report.json (each stage's report),
# log.txt and table.txt (summary), and prints the table last. Expected on the H100: 1-1.5 minutes
# for stage 1, 1-1.5 for stage 2: 2-3 minutes in all (plus REB_GRID_S).
# REB_SHAPES (default the benchmark's two), REB_ARGS (more suite options for stages 1 and 2),
# PYTHON (python3).
set -u
export PYTHONUNBUFFERED=1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
py=${PYTHON:-python3}
out=${OUT:-/tmp/bwd-rebuild}
work=$(mktemp -d)
mkdir -p "$out"
shapes=${REB_SHAPES:-"4,16,2048,64;2,16,4096,128"}
mapfile -t groups < <("$py" -m lab.bwd_rebuild.variants groups) || exit 1
t0=$(date +%s)
: > "$out/log.txt"
stage() {  # name, then the suite's arguments: one suite run into $work/<name>, its log kept
  local name=$1
  shift
  echo "== $name at $(( $(date +%s) - t0 )) s" | tee -a "$out/log.txt"
  "$@" --out "$work/$name" > "$work/$name.log" 2>&1
  echo "   exit $? at $(( $(date +%s) - t0 )) s" | tee -a "$out/log.txt"
  grep -E "records in|skipped|FAIL|failed|Error|error|grid" "$work/$name.log" | head -40 | tee -a "$out/log.txt"
  cat "$work/$name.log" >> "$out/log.txt"
}
stages=" ${REB_STAGES:-chromium native grid} "
for i in $(seq 1 "${#groups[@]}"); do
  [[ $stages == *" chromium "* ]] || break
  # shellcheck disable=SC2086
  stage "g$i" "$py" -m bench.suite --kernels "${groups[$((i - 1))]}" --runtimes chromium --passes "${REB_PASSES:-checked}" \
    --shapes "$shapes" --repeat 1 --no-live --budget-s 150 ${REB_ARGS:-}
done
native=${REB_NATIVE-$("$py" -m lab.bwd_rebuild.variants native)}
if [ -n "$native" ] && [[ $stages == *" native "* ]]; then
  # shellcheck disable=SC2086
  stage native timeout 150 "$py" -m bench.suite --kernels "$native" --runtimes native --shapes "$shapes" --repeat 1 ${REB_ARGS:-}
fi
grid_s=${REB_GRID_S:-0}
if [ "$grid_s" -gt 0 ] && [[ $stages == *" grid "* ]]; then
  # The grid runs before the suite's benchmark requests: one tiny request, no live check.
  stage grid timeout "$grid_s" "$py" -m bench.suite --kernels varlen_bwd.smx --runtimes chromium --passes checked \
    --shapes 1,1,64,64 --rounds 5 --warmup-s 0.2 --repeat 1 --no-live --grid varlen_bwd --budget-s "$grid_s"
fi
"$py" - "$work" "$out" <<'EOF'
import json, sys
from pathlib import Path
work, out = Path(sys.argv[1]), Path(sys.argv[2])
lines, reports = [], {}
for d in sorted(p for p in work.iterdir() if p.is_dir()):
    if (d / "records.json").exists() and d.name != "grid":
        lines += [json.dumps(dict(r, stage=d.name)) for r in json.loads((d / "records.json").read_text())]
    if (d / "report.json").exists():
        reports[d.name] = json.loads((d / "report.json").read_text())
(out / "records.jsonl").write_text("".join(line + "\n" for line in lines))
(out / "report.json").write_text(json.dumps(reports, indent=1) + "\n")
print(f"device.sh: {len(lines)} records from {len(reports)} stages")
EOF
"$py" -m lab.bwd_rebuild.summary "$out/records.jsonl" "$out/report.json" > "$out/table.txt"
echo "device.sh: done in $(( $(date +%s) - t0 )) s"
cat "$out/table.txt"
