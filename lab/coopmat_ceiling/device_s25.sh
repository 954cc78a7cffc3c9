#!/usr/bin/env bash
# S25 on the lent machine: flash_fwd.smx on the 16x8x16 and 16x8x8 fragment shapes beside
# 16x16x16 at (4,16,2048,64) (device_candidates.sh). A plan takes the adapter's first f16 -> f32
# configuration; this copy of the tree's registry gives the two candidate ids theirs.
set -u
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
bash lab/coopmat_ceiling/device_candidates.sh s25 flash_fwd 4,16,2048,64
