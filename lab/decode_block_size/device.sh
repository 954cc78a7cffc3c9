#!/bin/sh
# The H100's figures of lab/decode_block_size (README.md): the decode kernel with its block size an
# override constant and a Params field, timed in one series per case; then each kernel's compile
# seconds on a fresh device (lab/server_load/new_shape_cost.py). About 90 s. On the lent machine,
# after bench/devcarry.py's set-up calls:
#     python3 -m bench.devcarry run -- sh lab/decode_block_size/device.sh
# Here (a dry run on lavapipe): OUT=/tmp/out sh lab/decode_block_size/device.sh --smoke --rounds 5 --warm 0.3
set -e
python3 -m lab.server_load.new_shape_cost --json "${OUT:?OUT names the folder that comes back}/compile_costs.jsonl"
python3 -m lab.decode_block_size.block_size --json "$OUT/block_size.jsonl" "$@"
