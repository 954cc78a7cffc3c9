"""flash_fwd.smx's candidates for one device call, written into a working tree as extra registered
kernels so that the benchmark suite times them beside the kernel as registered:

    python3 -m lab.coopmat_ceiling.fwd_candidates apply     # shaders/ files + manifest entries
    python3 -m lab.coopmat_ceiling.fwd_candidates kernels   # the comma-separated ids device_s2.sh times
    python3 -m lab.coopmat_ceiling.fwd_candidates revert    # removes both again

The candidates (each at both benchmark shapes):
    flash_fwd.smx            the kernel as registered (products and shares written out), its tiles
    flash_fwd.smx_loops      the kernel before that (BEFORE: loops over register arrays), its tiles:
                             the same call's baseline
    flash_fwd.smx_t<RB>x<BC>  the registered kernel with one tile only (TILES): RB row blocks, BC
                             keys a tile, two subgroups a row block where D > 64 (as registered)
                             unless s1 (one) or d2 (two); r2: two row blocks a matrix subgroup
                             (RPS); a tile the adapter cannot hold is skipped by the suite

Each is a copy of flash_fwd.smx's manifest entry under its own id, ranked below it (the page and
the API never prefer it). Only entries and files this script made are removed by `revert`, so
another helper's applied variants (the backward's) may sit beside them. The benchmark does not
check a dense op's outputs: the candidates' code is the registered kernel's (checked on the
lavapipe test bed and in Chromium's conformance grid) or the one it replaced.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[2]
SHADERS = ROOT / "shaders"
MANIFEST = SHADERS / "manifest.json"
BASE = "flash_fwd.smx"
BEFORE = "a9dbfdbaf833d5f7c71615f1d53a490570e713f9"  # main's flash_fwd.smx before its loops were written out
DS = "min(2, ceil_div(head_dim, 64))"  # as registered: two subgroups a row block where D > 64
TILES = {  # id suffix -> the one tile: t<RB>x<BC>, s1 one subgroup a row block, d2 two, r2 two row blocks a subgroup
    "t8x32": {"RB": 8, "BC": 32, "DS": DS},
    "t4x32": {"RB": 4, "BC": 32, "DS": DS},
    "t4x32s1": {"RB": 4, "BC": 32},
    "t4x64": {"RB": 4, "BC": 64, "DS": DS},
    "t2x64": {"RB": 2, "BC": 64, "DS": DS},
    "t8x32r2": {"RB": 8, "BC": 32, "DS": DS, "RPS": 2},
    "t8x32d2r2": {"RB": 8, "BC": 32, "DS": 2, "RPS": 2},
    "t4x64r2": {"RB": 4, "BC": 64, "DS": DS, "RPS": 2},
}
RANK0 = 51  # below flash_fwd.smx (60), above flash_fwd.blocked_f16 (50)
MARK = "lab/coopmat_ceiling/fwd_candidates.py"  # in each entry's summary: what revert removes


def candidates(manifest: Dict) -> Dict[str, Dict]:
    """{id: manifest entry} of every candidate (flash_fwd.smx as registered is not one)."""
    base = manifest["kernels"][BASE]
    out: Dict[str, Dict] = {}
    loops = copy.deepcopy(base)
    loops["template"] = f"{BASE}_loops"
    out[f"{BASE}_loops"] = loops
    for name, tile in TILES.items():
        e = copy.deepcopy(base)
        e["template"] = BASE
        e["tiles"] = [tile]
        out[f"{BASE}_{name}"] = e
    for i, (kid, e) in enumerate(out.items()):
        e["rank"] = RANK0 + i
        e["summary"] = f"A candidate of {BASE} ({MARK}): {kid}."
    return out


def apply() -> None:
    manifest = json.loads(MANIFEST.read_text())
    made = candidates(manifest)
    clash = sorted(set(made) & set(manifest["kernels"]))
    if clash:
        raise SystemExit(f"fwd_candidates: {clash} are registered already: revert first")
    before = subprocess.run(
        ["git", "show", f"{BEFORE}:shaders/{BASE}.wgsl"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    (SHADERS / f"{BASE}_loops.wgsl").write_text(before)
    manifest["kernels"].update(made)
    MANIFEST.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    print(f"fwd_candidates: registered {', '.join(made)}")


def revert() -> None:
    manifest = json.loads(MANIFEST.read_text())
    mine = [k for k, e in manifest["kernels"].items() if MARK in str(e.get("summary", ""))]
    for k in mine:
        del manifest["kernels"][k]
    MANIFEST.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    (SHADERS / f"{BASE}_loops.wgsl").unlink(missing_ok=True)
    print(f"fwd_candidates: removed {', '.join(mine) or 'nothing'}")


def kernels() -> List[str]:
    return [BASE, *candidates(json.loads(MANIFEST.read_text()))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("verb", choices=["apply", "revert", "kernels"])
    args = ap.parse_args(argv)
    if args.verb == "apply":
        apply()
    elif args.verb == "revert":
        revert()
    else:
        print(",".join(kernels()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
