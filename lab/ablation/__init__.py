"""The machinery of an ablation: a registered kernel with one part removed at a time, written into
a working tree as extra registered kernels so that the benchmark suite times them beside the
kernel as registered (outputs wrong: speed only). lab/bwd_ablation and lab/fwd_ablation hold the
tables (regions, parts, groups) of their kernel.

Each edit must match the kernel's text exactly once inside its region, or `apply` stops and says
which: the edits follow the kernel's text, so a changed kernel stops `apply` rather than ablating
the wrong thing. Each variant is a copy of the kernel's manifest entry under its own id and a rank
below the kernel's (the page and the API never prefer it). The benchmark does not check a dense
op's outputs, so the variants are timed like any kernel.
"""

from __future__ import annotations

import argparse
import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Tuple

BARRIER = "workgroupBarrier();"


def is_barrier(line: str) -> bool:
    """A barrier line, with or without a comment after it."""
    return line.strip().split("//")[0].strip() == BARRIER


Regions = Dict[str, Tuple[str, str]]  # name -> (first marker, end marker; "\x00end": the text's end)


def region(text: str, regions: Regions, name: str) -> Tuple[int, int]:
    first, end = regions[name]
    a = text.find(first)
    if a < 0 or text.find(first, a + 1) >= 0:
        raise SystemExit(f"ablation: the region marker {first!r} is not in the kernel exactly once")
    b = len(text) if end == "\x00end" else text.find(end, a)
    if b < 0:
        raise SystemExit(f"ablation: the region end {end!r} does not follow {first!r}")
    return a, b


def sub(text: str, regions: Regions, where: str, old: str, new: str) -> str:
    """`old` replaced by `new` inside region `where`, where it must occur exactly once."""
    a, b = region(text, regions, where)
    n = text.count(old, a, b)
    if n != 1:
        raise SystemExit(f"ablation: {old.strip()!r} occurs {n} times in region {where}, not once")
    i = text.find(old, a, b)
    return text[:i] + new + text[i + len(old) :]


def drop_lines(text: str, regions: Regions, where: str, *lines: str) -> str:
    """Each line (its text without indentation) deleted from region `where` (once each)."""
    for line in lines:
        a, b = region(text, regions, where)
        rows = text[a:b].split("\n")
        hits = [i for i, r in enumerate(rows) if r.strip() == line]
        if len(hits) != 1:
            raise SystemExit(f"ablation: the line {line!r} occurs {len(hits)} times in region {where}, not once")
        del rows[hits[0]]
        text = text[:a] + "\n".join(rows) + text[b:]
    return text


def drop_barrier(text: str, regions: Regions, where: str, k: int) -> str:
    """The k-th (1-based) `workgroupBarrier();` line of region `where` deleted."""
    a, b = region(text, regions, where)
    rows = text[a:b].split("\n")
    hits = [i for i, r in enumerate(rows) if is_barrier(r)]
    if k > len(hits):
        raise SystemExit(f"ablation: region {where} has {len(hits)} barriers, not {k}")
    del rows[hits[k - 1]]
    return text[:a] + "\n".join(rows) + text[b:]


def all_barriers(text: str, regions: Regions, where: str) -> str:
    a, b = region(text, regions, where)
    n = sum(1 for r in text[a:b].split("\n") if is_barrier(r))
    for _ in range(n):
        text = drop_barrier(text, regions, where, 1)
    return text


def empty_loop(text: str, regions: Regions, where: str, closing: str) -> str:
    """The loop opening region `where` (its first marker) with an empty body: `closing` is the
    line that closes the loop (with its indentation and newlines), the last in the region."""
    a, b = region(text, regions, where)
    head = regions[where][0]
    body_end = text.rfind(closing, a, b)
    if body_end < 0:
        raise SystemExit(f"ablation: no end of the loop in region {where}")
    return text[: a + len(head)] + text[body_end:]


Variant = Tuple[str, Callable[[str], str]]  # (what is removed, edit of the kernel's text)


@dataclass
class Ablation:
    base: str  # the registered kernel
    lab: str  # the lab folder, named in each variant's header
    rank0: int  # variants take ranks rank0, rank0 + 1, ...: free ranks below the kernel's
    parts: Dict[str, Variant]
    groups: List[List[str]]  # one suite run each: a series holds every kernel of a group at once

    def __post_init__(self) -> None:
        assert sorted(p for g in self.groups for p in g) == sorted(self.parts), "every part in exactly one group"

    @property
    def prefix(self) -> str:
        return self.base + "_abl_"

    def variants(self, text: str) -> Dict[str, str]:
        """part -> the kernel's text with that part removed (SystemExit when an edit misses)."""
        out = {}
        for part, (_, edit) in self.parts.items():
            changed = edit(text)
            if changed == text:
                raise SystemExit(f"ablation: {part} changed nothing")
            out[part] = changed
        return out

    def apply(self, root: Path) -> List[str]:
        self.revert(root)
        text = (root / "shaders" / f"{self.base}.wgsl").read_text()
        manifest = load(root)
        base = manifest["kernels"][self.base]
        ranks = {k["rank"] for k in manifest["kernels"].values() if k["interface"] == base["interface"]}
        bodies = self.variants(text)
        taken = ranks & set(range(self.rank0, self.rank0 + len(bodies)))
        if taken:
            raise SystemExit(f"ablation: ranks {sorted(taken)} are taken; move rank0")
        ids = []
        for i, (part, body) in enumerate(bodies.items()):
            kid = self.prefix + part
            what = self.parts[part][0]
            note = f"// LAB VARIANT ({self.lab}, outputs wrong: speed only): {what} removed.\n"
            (root / "shaders" / f"{kid}.wgsl").write_text(note + body)
            entry = copy.deepcopy(base)
            entry["rank"] = self.rank0 + i
            entry["summary"] = f"Lab ablation of {self.base}, outputs wrong: {what} removed."
            manifest["kernels"][kid] = entry
            ids.append(kid)
        dump(root, manifest)
        return ids

    def revert(self, root: Path) -> List[str]:
        manifest = load(root)
        gone = [k for k in manifest["kernels"] if k.startswith(self.prefix)]
        for k in gone:
            del manifest["kernels"][k]
        if gone:
            dump(root, manifest)
        for f in (root / "shaders").glob(f"{self.prefix}*.wgsl"):
            f.unlink()
        return gone

    def main(self, argv: List[str], root: Path) -> int:
        ap = argparse.ArgumentParser(description=f"{self.base} with one part removed at a time ({self.lab})")
        ap.add_argument("command", choices=("apply", "revert", "groups", "list"))
        ap.add_argument("--root", default=str(root), help="the working tree (default: this checkout)")
        args = ap.parse_args(argv)
        root = Path(args.root)
        if args.command == "apply":
            ids = self.apply(root)
            print(f"ablation: {len(ids)} variants of {self.base} registered in {manifest_path(root)}")
        elif args.command == "revert":
            print(f"ablation: {len(self.revert(root))} variants removed")
        elif args.command == "groups":
            for g in self.groups:
                print(",".join([self.base] + [self.prefix + p for p in g]))
        else:
            for part, (what, _) in self.parts.items():
                print(f"{self.prefix + part}: {what}")
        return 0


def manifest_path(root: Path) -> Path:
    return root / "shaders" / "manifest.json"


def load(root: Path) -> dict:
    return json.loads(manifest_path(root).read_text())


def dump(root: Path, manifest: dict) -> None:
    manifest_path(root).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
