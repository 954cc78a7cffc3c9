#!/usr/bin/env bash
# An ablation (lab/ablation), timed by the benchmark suite (bench.suite: the protocol, Chromium
# with Dawn's robustness on) on this machine's GPU: one suite run per group of variants
# (`python3 -m $ABL groups`), each group with the registered kernel as its baseline in the same
# series. ABL: the variants' module (lab.bwd_ablation.variants, lab.fwd_ablation.variants).
#
# In a tree where `python3 -m $ABL apply` ran before `python3 -m bench.devcarry pack` (the page's
# wheel must carry the variants), after devcarry's calls 1-3, in one more call:
#   python3 -m bench.devcarry run -- env ABL=lab.fwd_ablation.variants bash lab/ablation/device.sh
# Local dry run (SwiftShader: the smx kernels are skipped as unavailable, the plumbing runs):
#   ABL=lab.fwd_ablation.variants ABL_SHAPES="1,2,64,64" ABL_ARGS="--gpu software --rounds 5 --warmup-s 0.2" \
#     PYTHON=.venv/bin/python OUT=/tmp/abl bash lab/ablation/device.sh
# Writes $OUT/records.jsonl (every record, its group added), reports.json, log.txt and
# table.txt (summary.py), and prints the table last. Each group has 170 s of the suite's budget
# (--budget-s: a request that would end later is skipped); expected on the H100: 4-6 minutes.
# ABL_SHAPES (default the benchmark's two), ABL_ARGS (more suite options), ABL_GROUPS (which
# groups, e.g. "1 3"; default all), PYTHON (python3).
set -u
export PYTHONUNBUFFERED=1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
py=${PYTHON:-python3}
abl=${ABL:?ABL: the variants module, e.g. lab.fwd_ablation.variants}
base=$("$py" -m "$abl" groups | head -1 | cut -d, -f1)
out=${OUT:-/tmp/ablation}
work=$(mktemp -d)
mkdir -p "$out"
shapes=${ABL_SHAPES:-"4,16,2048,64;2,16,4096,128"}
mapfile -t groups < <("$py" -m "$abl" groups) || exit 1
[ "${#groups[@]}" -gt 0 ] || { echo "device.sh: no groups (variants.py apply first)"; exit 1; }
t0=$(date +%s)
: > "$out/log.txt"
for i in ${ABL_GROUPS:-$(seq 1 "${#groups[@]}")}; do
  kernels=${groups[$((i - 1))]}
  echo "== group $i at $(( $(date +%s) - t0 )) s: $kernels" | tee -a "$out/log.txt"
  # shellcheck disable=SC2086
  "$py" -m bench.suite --kernels "$kernels" --runtimes chromium --shapes "$shapes" --repeat 1 --no-live \
    --out "$work/g$i" --budget-s 170 ${ABL_ARGS:-} > "$work/g$i.log" 2>&1
  echo "   suite exit $? at $(( $(date +%s) - t0 )) s" | tee -a "$out/log.txt"
  grep -E "records in|skipped|FAILED|failed|Error|error" "$work/g$i.log" | grep -v "^\s*$" | head -20 | tee -a "$out/log.txt"
  cat "$work/g$i.log" >> "$out/log.txt"
done
"$py" - "$work" "$out" <<'EOF'
import json, sys
from pathlib import Path
work, out = Path(sys.argv[1]), Path(sys.argv[2])
lines, reports = [], {}
for g in sorted(work.glob("g*/"), key=lambda p: int(p.name[1:])):
    n = int(g.name[1:])
    if (g / "records.json").exists():
        lines += [json.dumps(dict(r, group=n)) for r in json.loads((g / "records.json").read_text())]
    if (g / "report.json").exists():
        reports[g.name] = json.loads((g / "report.json").read_text())
(out / "records.jsonl").write_text("".join(line + "\n" for line in lines))
(out / "reports.json").write_text(json.dumps(reports, indent=1) + "\n")
print(f"device.sh: {len(lines)} records from {len(reports)} groups")
EOF
"$py" -m lab.ablation.summary "$out/records.jsonl" --base "$base" > "$out/table.txt"
echo "device.sh: done in $(( $(date +%s) - t0 )) s"
cat "$out/table.txt"
