"""Candidates of the written-out varlen_bwd.smx, and the kernel it was written out from, written
into a working tree as extra registered kernels so that the benchmark suite times them in one
series beside the registered kernel (outputs right: each candidate is the registered kernel's
WGSL with one tile).

    python3 -m lab.bwd_rebuild.variants apply     # manifest entries (+ shaders/varlen_bwd.smx_loops.wgsl)
    python3 -m lab.bwd_rebuild.variants ids       # the kernel ids apply registers, comma-separated
    python3 -m lab.bwd_rebuild.variants groups    # the kernel lists device.sh times, one suite run each
    python3 -m lab.bwd_rebuild.variants native    # the f32 kernels device.sh times natively
    python3 -m lab.bwd_rebuild.variants list      # what each candidate is at D = 64 and D = 128
    python3 -m lab.bwd_rebuild.variants revert    # removes them again

A candidate is varlen_bwd.smx's manifest entry under its own id (`varlen_bwd.smx_v_<name>`, a rank
below the registered kernel's) with `template` the registered WGSL and one tile: an expression of
head_dim, so that each names a distinct shape at both of the benchmark's head dims (64 and 128)
and fits the H100's 48 KiB at both (`apply` checks that with the registry's own fit, and fails
rather than let the suite find a candidate that cannot run). `varlen_bwd.smx_loops` is the kernel
as it was before its matrix loops were written out (git 27c0746, the one burst S2 timed), its WGSL
and manifest entry taken from git: the baseline of the series. Nothing in the product reads this
folder; the candidates exist only in a tree where `apply` ran (the coordinator's, before
`python3 -m bench.devcarry pack`).
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Mapping, Union

ROOT = Path(__file__).resolve().parents[2]
BASE = "varlen_bwd.smx"
PREFIX = BASE + "_v_"
LOOPS = BASE + "_loops"
LOOPS_COMMIT = "27c0746"  # the rebuilt kernel with its fragment loops (burst S2's registered one)
RANK0 = 40  # candidates take ranks RANK0, RANK0 + 1, ...: below varlen_bwd.smx (60), above .tiled (20)
BIG = "min(1, head_dim // 65)"  # 1 above head_dim 64 (the D = 128 shape), else 0

# name -> (what it is, its one tile). S below is the fragment side (16 on the H100).
Tile = Dict[str, Union[int, str]]
CANDIDATES: Dict[str, tuple] = {
    "ds1": (
        "one subgroup a row block (both roles: K and V, dK and dV in its registers, two independent product "
        "chains); D 64: two tile buffers, D 128: one",
        {"RB": 8, "BT": "SGM_M", "DS": 1, "NB": f"2 - {BIG}"},
    ),
    "wg256": (
        "4 row blocks, 2 subgroups each (256 invocations: two workgroups an SM where registers allow); D 64: tiles "
        "of 2 S rows (two independent score products a subgroup), one buffer; D 128: tiles of S rows, two buffers",
        {"RB": 4, "BT": f"2 * SGM_M - SGM_M * {BIG}", "DS": 2, "NB": f"1 + {BIG}"},
    ),
}
# The f32 kernel's candidates, timed natively: name -> (what it is, its defines).
TILED = "varlen_bwd.tiled"
TILED_CANDIDATES: Dict[str, tuple] = {}
NATIVE: List[str] = [TILED] + [f"{TILED}_v_{name}" for name in TILED_CANDIDATES]
# One suite run per group, each with the registered kernel and the loops form as its baselines: a
# series holds every kernel of a group at once on the GPU, so groups stay small (<= 10).
GROUPS: List[List[str]] = [[BASE, LOOPS] + [PREFIX + name for name in CANDIDATES]]
H100_F16 = {"componentType": "f16", "resultComponentType": "f32", "M": 16, "N": 16, "K": 16}  # the configuration there
SHAPES = {64: dict(head_dim=64, heads_q=16, heads_kv=16), 128: dict(head_dim=128, heads_q=16, heads_kv=16)}


def manifest_path(root: Path) -> Path:
    return root / "shaders" / "manifest.json"


def load(root: Path) -> dict:
    return json.loads(manifest_path(root).read_text())


def dump(root: Path, manifest: dict) -> None:
    manifest_path(root).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")


def git_show(root: Path, what: str) -> str:
    return subprocess.run(["git", "-C", str(root), "show", what], check=True, capture_output=True, text=True).stdout


def entries(manifest: Mapping, root: Path) -> Dict[str, dict]:
    """id -> manifest entry of every candidate and of the old kernel."""
    base = manifest["kernels"][BASE]
    out = {}
    for i, (name, (what, tile)) in enumerate(CANDIDATES.items()):
        entry = copy.deepcopy(base)
        entry["rank"] = RANK0 + i
        entry["template"] = BASE
        entry["tiles"] = [dict(tile)]
        entry["summary"] = f"Lab candidate of {BASE}: {what}."
        out[PREFIX + name] = entry
    for i, (name, (what, defines)) in enumerate(TILED_CANDIDATES.items()):
        entry = copy.deepcopy(manifest["kernels"][TILED])
        entry["rank"] = RANK0 + 10 + i
        entry["template"] = TILED
        entry["defines"] = {**entry.get("defines", {}), **defines}
        entry["summary"] = f"Lab candidate of {TILED}: {what}."
        out[f"{TILED}_v_{name}"] = entry
    loops = json.loads(git_show(root, f"{LOOPS_COMMIT}:shaders/manifest.json"))["kernels"][BASE]
    loops["rank"] = RANK0 + len(CANDIDATES)
    loops["summary"] = f"Lab baseline: {BASE} as it was at {LOOPS_COMMIT}, its fragment loops not written out."
    loops["half"] = base["half"]  # what it holds in float16 is the registered kernel's
    loops["limits"] = {**loops.get("limits", {}), "alibi_on": 0, "sinks_on": 0}  # it predates them
    out[LOOPS] = loops
    return out


def knobs_at(root: Path, kernel_id: str, head_dim: int) -> Dict[str, int]:
    """The knobs `kernel_id` takes at a benchmark shape on an H100-like adapter (the registry's fit:
    DoesNotFit when no tile fits its 48 KiB)."""
    from wgattn import registry  # here, not at the top: `groups` runs where wgattn may not be installed
    from wgattn.target import WEBGPU_LIMITS, MatrixConfig, Target

    h100 = Target(
        features=frozenset(("shader-f16", "subgroups", "chromium-experimental-subgroup-matrix")),
        limits={**WEBGPU_LIMITS, "max-compute-workgroup-storage-size": 49152, "max-compute-invocations-per-workgroup": 1024},
        matrix_configs=(MatrixConfig.from_json(H100_F16),),
        subgroup_sizes=(32, 32),
        name="H100 (as Chromium reports it)",
    )
    sizes = dict(SHAPES[head_dim], total_q=4096, total_k=4096, batch_size=1, max_seqlen=4096)
    k = registry.load(manifest_path(root)).kernel(kernel_id)
    fit = k.fit(sizes, h100)
    return {**fit.knobs, "storage": fit.storage}


def apply(root: Path) -> List[str]:
    revert(root)
    manifest = load(root)
    new = entries(manifest, root)
    ranks = {k["rank"] for k in manifest["kernels"].values() if k["interface"] == manifest["kernels"][BASE]["interface"]}
    taken = ranks & {e["rank"] for e in new.values()}
    if taken:
        raise SystemExit(f"variants: ranks {sorted(taken)} are taken; move RANK0")
    (root / "shaders" / f"{LOOPS}.wgsl").write_text(
        f"// LAB BASELINE (lab/bwd_rebuild/variants.py): {BASE} as it was at {LOOPS_COMMIT}.\n"
        + git_show(root, f"{LOOPS_COMMIT}:shaders/{BASE}.wgsl")
    )
    manifest["kernels"].update(new)
    dump(root, manifest)
    for kid in new:  # every candidate runs at both shapes
        for d in SHAPES if not kid.startswith(TILED) else ():
            knobs_at(root, kid, d)
    return list(new)


def revert(root: Path) -> List[str]:
    manifest = load(root)
    gone = [k for k in manifest["kernels"] if k.startswith((PREFIX, TILED + "_v_")) or k == LOOPS]
    for k in gone:
        del manifest["kernels"][k]
    if gone:
        dump(root, manifest)
    (root / "shaders" / f"{LOOPS}.wgsl").unlink(missing_ok=True)
    return gone


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=("apply", "revert", "ids", "groups", "native", "list"))
    ap.add_argument("--root", default=str(ROOT), help="the working tree (default: this checkout)")
    args = ap.parse_args(argv)
    root = Path(args.root)
    if args.command == "apply":
        ids = apply(root)
        print(f"variants: {len(ids)} kernels registered in {manifest_path(root)}: {', '.join(ids)}")
    elif args.command == "revert":
        print(f"variants: {len(revert(root))} kernels removed")
    elif args.command == "ids":
        print(",".join(entries(load(root), root)))
    elif args.command == "groups":
        for g in GROUPS:
            print(",".join(g))
    elif args.command == "native":
        print(",".join(NATIVE))
    else:
        ids = [k for g in GROUPS for k in g]
        registered = set(load(root)["kernels"])
        for kid in ids:
            if kid not in registered:
                print(f"{kid}: not registered (apply first)")
                continue
            shown = []
            for d in SHAPES:
                kn = knobs_at(root, kid, d)
                shown.append(f"D {d}: " + " ".join(f"{n}={kn[n]}" for n in ("RB", "BT", "DS", "NB", "WG", "storage") if n in kn))
            print(f"{kid}: {'; '.join(shown)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
