"""The kernel registry: shaders/manifest.json, read once and shared by every runtime.

One kernel id (e.g. "sdpa_arena.seed") names the WGSL file shaders/<id>.wgsl, its registry entry,
its GPU labels and its test ids. An interface describes the bindings, the uniform `Params` struct
(fields in WGSL order) and the dispatch grid; a kernel implements an interface.
"""
from __future__ import annotations

import ast
import json

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

__all__ = ["Interface", "Kernel", "Registry", "load", "shader_dir"]

# WGSL scalar types a Params field may have, as struct format characters (little-endian, 4 bytes).
_FIELD_FORMATS = {"u32": "I", "i32": "i", "f32": "f"}


def shader_dir() -> Path:
    """The folder holding manifest.json and the .wgsl files (WGATTN_SHADERS overrides it)."""
    env = os.environ.get("WGATTN_SHADERS")
    if env:
        return Path(env)
    # py/wgattn/registry.py -> <repo>/shaders; the page mirrors this layout in Pyodide's file system.
    return Path(__file__).resolve().parents[2] / "shaders"


@dataclass(frozen=True)
class Interface:
    """A binding contract that any kernel (the project's or a user's) can implement."""

    name: str
    summary: str
    reference: str
    conventions: Mapping[str, str]
    bindings: Tuple[Mapping[str, object], ...]
    params: Tuple[Tuple[str, str], ...]
    grid: Mapping[str, str]

    @property
    def params_size(self) -> int:
        return 4 * len(self.params)

    def pack_params(self, values: Mapping[str, float]) -> bytes:
        """The uniform `Params` bytes; fields missing from `values` (padding) are 0."""
        unknown = set(values) - {name for name, _ in self.params}
        if unknown:
            raise ValueError(f"{self.name}: unknown params {sorted(unknown)}")
        fmt = "<" + "".join(_FIELD_FORMATS[t] for _, t in self.params)
        out = []
        for name, typ in self.params:
            value = values.get(name, 0)
            if typ == "f32":
                out.append(float(value))
            else:
                ivalue = int(value)
                lo, hi = (0, 2**32 - 1) if typ == "u32" else (-(2**31), 2**31 - 1)
                if not lo <= ivalue <= hi:
                    raise ValueError(f"{self.name}: param {name}={ivalue} does not fit in {typ}")
                out.append(ivalue)
        return struct.pack(fmt, *out)

    def workgroups(self, values: Mapping[str, int], overrides: Mapping[str, int],
                   max_per_dim: int = 65535) -> Tuple[int, int, int]:
        """Workgroup counts: ceil(items / per_workgroup), folded into (x, y) past max_per_dim."""
        names = dict(values)
        names.update(overrides)
        items = _evaluate(self.grid["items"], names)
        per_wg = _evaluate(self.grid.get("per_workgroup", "1"), names)
        count = -(-items // per_wg)
        if count <= max_per_dim:
            return (max(count, 1), 1, 1)
        y = -(-count // max_per_dim)
        if y > max_per_dim:
            raise ValueError(
                f"{self.name}: {count} workgroups exceed {max_per_dim} x {max_per_dim}; use fewer rows")
        return (max_per_dim, y, 1)


@dataclass(frozen=True)
class Kernel:
    """One WGSL implementation of an interface."""

    id: str
    interface: Interface
    summary: str
    entry_point: str
    overrides: Mapping[str, int]
    requires: Tuple[str, ...]

    @property
    def path(self) -> Path:
        return shader_dir() / f"{self.id}.wgsl"

    def source(self) -> str:
        return self.path.read_text()


@dataclass(frozen=True)
class Registry:
    interfaces: Mapping[str, Interface]
    kernels: Mapping[str, Kernel]

    def kernel(self, kernel_id: str) -> Kernel:
        try:
            return self.kernels[kernel_id]
        except KeyError:
            raise ValueError(
                f"unknown kernel {kernel_id!r}; registered: {sorted(self.kernels)}") from None

    def interface(self, name: str) -> Interface:
        try:
            return self.interfaces[name]
        except KeyError:
            raise ValueError(
                f"unknown interface {name!r}; registered: {sorted(self.interfaces)}") from None

    def kernels_of(self, interface: str) -> List[Kernel]:
        return [k for k in self.kernels.values() if k.interface.name == interface]


_CACHE: Dict[str, Registry] = {}


def load(path: Optional[Path] = None) -> Registry:
    """Parse manifest.json (cached per path)."""
    path = Path(path) if path is not None else shader_dir() / "manifest.json"
    key = str(path)
    if key not in _CACHE:
        raw = json.loads(path.read_text())
        interfaces = {
            name: Interface(
                name=name,
                summary=spec["summary"],
                reference=spec["reference"],
                conventions=dict(spec.get("conventions", {})),
                bindings=tuple(spec["bindings"]),
                params=tuple((f, t) for f, t in spec["params"]),
                grid=dict(spec["grid"]),
            )
            for name, spec in raw["interfaces"].items()
        }
        kernels = {
            kid: Kernel(
                id=kid,
                interface=interfaces[spec["interface"]],
                summary=spec["summary"],
                entry_point=spec["entry_point"],
                overrides=dict(spec.get("overrides", {})),
                requires=tuple(spec.get("requires", ())),
            )
            for kid, spec in raw["kernels"].items()
        }
        _CACHE[key] = Registry(interfaces=interfaces, kernels=kernels)
    return _CACHE[key]


def _evaluate(expr: str, names: Mapping[str, int]) -> int:
    """Integer arithmetic on registry names: + - * // and ceil_div(a, b), nothing else."""

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise ValueError(f"grid expression {expr!r} names unknown {node.id!r}")
            return int(names[node.id])
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, ast.FloorDiv):
                return a // b
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "ceil_div" and len(node.args) == 2):
            a, b = ev(node.args[0]), ev(node.args[1])
            return -(-a // b)
        raise ValueError(f"grid expression {expr!r}: unsupported syntax")

    return ev(ast.parse(expr, mode="eval"))


