#!/usr/bin/env bash
# ALiBi and sinks against the plain forward: flash_fwd.blocked and blocked_f16, natively (wgpu-py,
# trusted and checked) and in Chromium (robustness on and off), by the suite's protocol, each kernel
# timed plain and with ALiBi and sinks in the same series (bench.suite --variants). Writes the
# suite's records.json, report.json, table.txt and the Chromium logs to $OUT, then prints the
# ratio of each variant to its plain record (lab.alibi_sinks.compare, also $OUT/alibi_sinks.txt).
# About 100 s on the H100 (the suite's --budget-s bounds the browser part).
#   on the device:  python3 -m bench.devcarry run -- bash lab/alibi_sinks/device.sh
#   dry run here:   OUT=/tmp/alibi PYTHON=.venv/bin/python SHAPES=1,2,128,64 bash lab/alibi_sinks/device.sh
set -euo pipefail
OUT=${OUT:?set OUT to the folder the results go to}
PYTHON=${PYTHON:-python3}
SHAPES=${SHAPES:-"1,16,4096,128"}
BUDGET=${BUDGET:-100}
"$PYTHON" -m bench.suite --kernels flash_fwd.blocked,flash_fwd.blocked_f16 --shapes "$SHAPES" \
  --variants plain,alibi+sinks --no-live --repeat 1 --rounds 10 --warmup-s 1 --budget-s "$BUDGET" --out "$OUT"
"$PYTHON" -m lab.alibi_sinks.compare "$OUT/records.json" | tee "$OUT/alibi_sinks.txt"
