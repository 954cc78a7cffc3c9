#!/usr/bin/env bash
# What ALiBi and sinks cost the forward on subgroup matrices, in one device call (expected on the
# H100: about 2 minutes; the suite's --budget-s of 150 s bounds the browser part): flash_fwd.smx timed plain and with ALiBi and sinks in the same series
# (bench.suite --variants plain,alibi+sinks), in Chromium with Dawn's robustness on (checked) and
# off (trusted), by the suite's protocol (20 rounds, 2 s warm-up, each series twice), causal, at
# (2,16,4096,128) and (4,16,2048,64). Target: the variant within 5% of plain. Prints the ratio of
# each variant's median to its plain one last (lab.alibi_sinks.compare).
# After devcarry's calls 1-3 (its wheel packed from a tree where flash_fwd.smx takes ALiBi and
# sinks), in one more call:
#   python3 -m bench.devcarry run -- bash lab/alibi_sinks/device.sh
# Dry run here (SwiftShader for Chromium: flash_fwd.smx is unavailable there, saying why):
#   AS_ARGS="--gpu software --rounds 5 --warmup-s 0.2 --repeat 1" SHAPES="1,2,128,64" \
#     PYTHON=.venv/bin/python OUT=/tmp/alibi bash lab/alibi_sinks/device.sh
# Writes $OUT/records.json, report.json, table.txt (the suite's), alibi_sinks.txt (the ratios) and
# log.txt. KERNELS (default flash_fwd.smx), SHAPES (B,H,S,D;...), AS_ARGS (more suite options,
# e.g. --grid flash_fwd,varlen_bwd: the conformance grids in both passes too, minutes more),
# MIN_SAMPLE_MS (default 20: the suite's --min-sample-ms, passed only where the suite has that
# option; empty: never), BUDGET (the suite's --budget-s, default 150), PYTHON (python3).
set -u
export PYTHONUNBUFFERED=1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
py=${PYTHON:-python3}
out=${OUT:-/tmp/alibi-sinks}
work=$(mktemp -d)
mkdir -p "$out"
t0=$(date +%s)
: > "$out/log.txt"
extra=()
min_ms=${MIN_SAMPLE_MS-20}
if [ -n "$min_ms" ]; then
  if "$py" -m bench.suite --help 2>/dev/null | grep -q -- '--min-sample-ms'; then
    extra=(--min-sample-ms "$min_ms")
  else
    echo "   the suite has no --min-sample-ms: timed without it" | tee -a "$out/log.txt"
  fi
fi
echo "== the suite in Chromium at $(( $(date +%s) - t0 )) s" | tee -a "$out/log.txt"
# shellcheck disable=SC2086
"$py" -m bench.suite --kernels "${KERNELS:-flash_fwd.smx}" --shapes "${SHAPES:-2,16,4096,128;4,16,2048,64}" \
  --variants plain,alibi+sinks --runtimes chromium --no-live --budget-s "${BUDGET:-150}" --out "$work/suite" \
  "${extra[@]}" ${AS_ARGS:-} > "$work/suite.log" 2>&1
echo "   suite exit $? at $(( $(date +%s) - t0 )) s" | tee -a "$out/log.txt"
cat "$work/suite.log" >> "$out/log.txt"
for f in records.json report.json table.txt; do
  [ -f "$work/suite/$f" ] && cp "$work/suite/$f" "$out/$f"
done
if [ -f "$out/records.json" ]; then
  "$py" -m lab.alibi_sinks.compare "$out/records.json" > "$out/alibi_sinks.txt" 2>> "$out/log.txt"
else
  echo "(the suite wrote no records: see log.txt)" > "$out/alibi_sinks.txt"
fi
echo "device.sh: done in $(( $(date +%s) - t0 )) s"
[ -f "$out/table.txt" ] && tail -n 20 "$out/table.txt"
cat "$out/alibi_sinks.txt"
