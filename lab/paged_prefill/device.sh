#!/usr/bin/env bash
# Paged prefill on the GPU, in one device call (expected on the H100: about 2.5 minutes):
#  1. Chromium (bench.suite, both passes: Dawn's robustness on and off), the target timed by the
#     suite's protocol: paged_prefill.smx_f16 on 8 sequences, 2,048 new tokens each over a
#     32k-token cache, GQA 32:8, D 128, an f16 cache, beside flash_fwd.smx on the same work unpaged
#     (8 x 2,048 packed queries against each sequence's 32,768 keys, causal bottom-right) in one
#     series (goal: >= 70% of flash_fwd.smx's TFLOP/s); and long-64k (one sequence, 1,024 new
#     tokens over a 65,536-token cache). Each kernel's output is checked against the float64
#     reference on its first and last new tokens before it is timed.
#  2. Natively (wgpu-py on the same GPU): `wgattn check` over paged_prefill's grid (tiled,
#     tiled_f16: the 70k-token row, D 512, every knob) and paged_decode's (split, split_f16: D 512,
#     the 66k-token row).
# After devcarry's calls 1-3 (its wheel packed from a tree with the paged_prefill kernels in
# shaders/manifest.json), in one more call:
#   python3 -m bench.devcarry run -- bash lab/paged_prefill/device.sh
# Dry run here (SwiftShader for Chromium: the smx kernels are skipped, saying why; lavapipe
# natively, a few grid cases):
#   PF_ARGS="--gpu software --prefill-smoke --rounds 5 --warmup-s 0.2" PF_CASES=target,target-tiled \
#     PF_CHECK="--case whole-cache --case d512 --case long" PYTHON=.venv/bin/python OUT=/tmp/pf \
#     bash lab/paged_prefill/device.sh
# Writes $OUT/prefill.jsonl (the records), report.json (the suite's), check-prefill.json,
# check-decode.json (wgattn check --json), log.txt and table.txt, and prints the table last.
# PF_CASES (bench/prefill.py's cases; default target,long-64k), PF_ARGS (more suite options),
# PF_CHECK (more wgattn check options, e.g. --case PREFIX), PYTHON (python3).
set -u
export PYTHONUNBUFFERED=1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
py=${PYTHON:-python3}
out=${OUT:-/tmp/paged-prefill}
work=$(mktemp -d)
mkdir -p "$out"
t0=$(date +%s)
: > "$out/log.txt"
echo "== the suite in Chromium at $(( $(date +%s) - t0 )) s" | tee -a "$out/log.txt"
# shellcheck disable=SC2086
"$py" -m bench.suite --kernels= --runtimes chromium --prefill "${PF_CASES:-target,long-64k}" --no-live --repeat 1 \
  --rounds 10 --out "$work/suite" --budget-s 150 ${PF_ARGS:-} > "$work/suite.log" 2>&1
echo "   suite exit $? at $(( $(date +%s) - t0 )) s" | tee -a "$out/log.txt"
cat "$work/suite.log" >> "$out/log.txt"
for f in prefill.jsonl report.json; do
  [ -f "$work/suite/$f" ] && cp "$work/suite/$f" "$out/$f"
done
for iface in paged_prefill paged_decode; do
  echo "== wgattn check --interface $iface at $(( $(date +%s) - t0 )) s" | tee -a "$out/log.txt"
  kernels=()
  [ "$iface" = paged_prefill ] && kernels=(--kernel paged_prefill.tiled --kernel paged_prefill.tiled_f16)
  # shellcheck disable=SC2086
  "$py" -m wgattn.cli check --interface "$iface" "${kernels[@]}" ${PF_CHECK:-} --json \
    > "$out/check-${iface#paged_}.json" 2>> "$out/log.txt"
  echo "   exit $? at $(( $(date +%s) - t0 )) s" | tee -a "$out/log.txt"
done
"$py" -m lab.paged_prefill.summary "$out" > "$out/table.txt" 2>> "$out/log.txt"
echo "device.sh: done in $(( $(date +%s) - t0 )) s"
cat "$out/table.txt"
