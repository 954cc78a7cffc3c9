#!/usr/bin/env bash
# The H100's figures of lab/decode_block_size (README.md), in one device call (expected: about
# 90 s, at most 2 minutes):
#  1. What a new shape costs to compile there, by kernel: each runnable kernel's page default on a
#     fresh device, NVIDIA's shader disk cache off (lab/server_load/new_shape_cost.py).
#  2. paged_decode with the cache's block size an override constant (before) and a Params field
#     (after), timed in one interleaved series per case (block_size.py): block sizes 16, 64 and 24,
#     an f16 and an f32 cache; both must agree bit for bit on filled values first. Samples last
#     at least 20 ms, as the suite's on a GPU (an idle GPU between short samples lowers its clock).
# After bench/devcarry.py's set-up calls, in one more call:
#   python3 -m bench.devcarry run -- bash lab/decode_block_size/device.sh
# Dry run here (lavapipe; its times mean nothing for a GPU):
#   BS_ARGS="--smoke --rounds 5 --warm 0.3 --min-sample-ms 2" BS_KERNELS=paged_decode,sdpa_arena PYTHON=.venv/bin/python \
#     OUT=/tmp/bs bash lab/decode_block_size/device.sh
# Writes $OUT/compile_costs.jsonl, $OUT/block_size.jsonl (the records), compile.txt and
# block_size.txt (each step's output), and prints the compile table, then the timing table last.
# BS_ARGS (more block_size.py options), BS_KERNELS (the kernels compiled: id prefixes, comma-
# separated; default all), PYTHON (python3).
set -u
export PYTHONUNBUFFERED=1
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
py=${PYTHON:-python3}
out=${OUT:?OUT names the folder that comes back}
mkdir -p "$out"
t0=$(date +%s)
# A real compile each time: NVIDIA's driver would otherwise answer from its disk cache.
__GL_SHADER_DISK_CACHE=0 MESA_SHADER_CACHE_DIR=$(mktemp -d) \
  "$py" -m lab.server_load.new_shape_cost --json "$out/compile_costs.jsonl" --kernels "${BS_KERNELS:-}" \
  >"$out/compile.txt" 2>&1
compiled=$?
t1=$(date +%s)
# shellcheck disable=SC2086  # BS_ARGS is a list of options
"$py" -m lab.decode_block_size.block_size --json "$out/block_size.jsonl" --min-sample-ms 20 ${BS_ARGS:-} >"$out/block_size.txt" 2>&1
timed=$?
t2=$(date +%s)
echo "== compile seconds of a new shape (exit $compiled, $((t1 - t0)) s)"
cat "$out/compile.txt"
echo "== block size: a constant (before) or a Params field (after) (exit $timed, $((t2 - t1)) s)"
cat "$out/block_size.txt"
exit $((compiled || timed))
