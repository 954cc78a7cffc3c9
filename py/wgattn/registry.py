"""The kernel registry: shaders/manifest.json, read once and shared by every runtime.

One kernel id (e.g. "sdpa_arena.seed") names the WGSL file shaders/<id>.wgsl, its registry entry,
its GPU labels and its test ids. An interface describes the bindings, the uniform `Params` struct
(fields in WGSL order) and the dispatch grid; a kernel implements an interface.
"""

from __future__ import annotations

import ast
import json
import numbers
import os
import re
import struct
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Tuple

from .errors import DoesNotFit, InterfaceMismatch
from .wgsl import preprocess, reader

if TYPE_CHECKING:  # plan imports nothing from here; the import is only for the annotation
    from .plan import Dispatch

__all__ = [
    "Interface",
    "Kernel",
    "Pass",
    "Registry",
    "load",
    "shader_dir",
    "target_limits",
    "set_target_limits",
    "DEFAULT_LIMITS",
]

# WGSL scalar types a Params field may have, as struct format characters (little-endian, 4 bytes).
_FIELD_FORMATS = {"u32": "I", "i32": "i", "f32": "f"}

# The adapter limits that tile choices may name. WebGPU's defaults hold on every adapter; a runtime
# that knows its adapter (wgattn.native, the page) sets what the device was created with.
DEFAULT_LIMITS = {"max_wg_storage": 16384, "max_invocations": 256, "cpu": 0}
_TARGET_LIMITS: Dict[str, int] = dict(DEFAULT_LIMITS)


def target_limits() -> Dict[str, int]:
    """The limits plans are built for now (tile shapes are chosen to fit them)."""
    return dict(_TARGET_LIMITS)


def set_target_limits(max_wg_storage: int, max_invocations: int, cpu: bool = False) -> None:
    """Build later plans for an adapter with these limits (its device asked for them in full);
    `cpu`: a software adapter (lavapipe, SwiftShader), where other tile shapes win."""
    _TARGET_LIMITS.update(max_wg_storage=int(max_wg_storage), max_invocations=int(max_invocations), cpu=int(bool(cpu)))


def shader_dir() -> Path:
    """The folder holding manifest.json and the .wgsl files (WGATTN_SHADERS overrides it)."""
    env = os.environ.get("WGATTN_SHADERS")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent
    # An installed wheel (pip, or micropip in the page's Pyodide) carries them as package data.
    packaged = here / "shaders"
    if (packaged / "manifest.json").is_file():
        return packaged
    # The repository (and its editable install): py/wgattn/registry.py -> <repo>/shaders.
    return here.parents[1] / "shaders"


@dataclass(frozen=True)
class Interface:
    """A binding contract that any kernel (the project's or a user's) can implement."""

    name: str
    summary: str
    reference: str
    conventions: Mapping[str, str]
    bindings: Tuple[Mapping[str, object], ...]
    params: Tuple[Tuple[str, str], ...]
    passes: Tuple["Pass", ...]

    def layout(self, uses: Tuple[int, ...]) -> List[Tuple[int, str]]:
        """(binding, WebGPU buffer binding type) for the bindings one pass uses: explicit layouts,
        so a kernel that leaves a binding unused still binds."""
        types = {}
        for b in self.bindings:
            if b["kind"] == "uniform":
                types[b["binding"]] = "uniform"
            else:
                types[b["binding"]] = "storage" if b.get("access") == "read_write" else "read-only-storage"
        return [(i, types[i]) for i in uses]

    @property
    def params_size(self) -> int:
        return 4 * len(self.params)

    @property
    def padding(self) -> Tuple[str, ...]:
        """The Params fields that are padding (named `_...` in the manifest and the WGSL): 0."""
        return tuple(name for name, _ in self.params if name.startswith("_"))

    def pack_params(self, values: Mapping[str, float]) -> bytes:
        """The uniform `Params` bytes. `values` gives every field except the padding ones (named
        `_...`), which are 0; a missing, unknown or padding field is a ValueError naming it, so a
        plan that forgets a field fails instead of sending 0 to the kernel."""
        padding = set(self.padding)
        fields = {name for name, _ in self.params}
        unknown = set(values) - fields
        if unknown:
            raise InterfaceMismatch(f"{self.name}: unknown params {sorted(unknown)}")
        given_padding = set(values) & padding
        if given_padding:
            raise InterfaceMismatch(f"{self.name}: params {sorted(given_padding)} are padding (always 0)")
        missing = [name for name, _ in self.params if name not in values and name not in padding]
        if missing:
            raise InterfaceMismatch(
                f"{self.name}: params {missing} are missing (every field but the padding {sorted(padding)} must be given)"
            )
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


@dataclass(frozen=True)
class Pass:
    """One dispatch of an interface: its entry point, the bindings it uses, its grid."""

    name: str
    entry_point: str
    uses: Tuple[int, ...]
    grid: Mapping[str, str]

    def workgroups(
        self, values: Mapping[str, int], overrides: Mapping[str, int], max_per_dim: int = 65535
    ) -> Tuple[int, int, int]:
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
            raise ValueError(f"{self.entry_point}: {count} workgroups exceed {max_per_dim} x {max_per_dim}; use fewer rows")
        return (max_per_dim, y, 1)


@dataclass(frozen=True)
class Kernel:
    """One WGSL implementation of an interface."""

    id: str
    interface: Interface
    summary: str
    overrides: Mapping[str, object]  # name -> int, or an expression of the params
    requires: Tuple[str, ...]
    limits: Mapping[str, int] = field(default_factory=dict)  # param -> largest value supported
    precision: str = "f32"  # "f16": computes in half precision (judged on f16-rounded inputs)
    template: str = ""  # the .wgsl file (without suffix) when it is not the kernel id
    # for #if in the template: an int, or an expression of the params (a variant per size class)
    defines: Mapping[str, object] = field(default_factory=dict)
    # Tile candidates, best first: each overrides `overrides`; the first whose workgroup storage
    # (the `storage` expression, bytes) and invocations (WG) fit the target adapter is used. A
    # candidate with "adapter": "cpu" (or "gpu") is only for software (or hardware) adapters.
    tiles: Tuple[Mapping[str, object], ...] = ()
    storage: str = ""
    caps: Mapping[str, int] = field(default_factory=dict)  # knob -> most the WGSL's arrays hold
    constraints: Tuple[str, ...] = ()  # expressions of the knobs that must be 0 (e.g. "BC % NCG")
    # May be compiled without runtime bounds checks (wgattn.native's trusted mode): every index the
    # kernel makes is guarded in its own code, given inputs the interface module validated.
    trusted: bool = False
    grids: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # pass -> its own grid

    @property
    def path(self) -> Path:
        return shader_dir() / f"{self.template or self.id}.wgsl"

    def source(self, sizes: Optional[Mapping[str, int]] = None) -> str:
        """The WGSL both runtimes compile: the template with includes and this kernel's defines
        (evaluated on the params `sizes` where they are expressions) expanded (wgattn.wgsl)."""
        defines = {
            k: (_evaluate(v, sizes or {}) if isinstance(v, str) else int(v))  # type: ignore[arg-type]
            for k, v in self.defines.items()
        }
        return preprocess(self.path.read_text(), defines, reader(shader_dir()), self.path.name)

    def knobs(
        self,
        sizes: Mapping[str, int],
        overrides: Optional[Mapping[str, object]] = None,
        limits: Optional[Mapping[str, int]] = None,
    ) -> Dict[str, int]:
        """The override constants for params `sizes`. A knob may be an expression of the params
        and of the knobs before it (tile shapes that follow head_dim); `overrides` replaces the
        registered values it names. With tile candidates, the first whose workgroup storage and
        invocations fit `limits` (default: target_limits()) is taken."""
        lim = dict(target_limits() if limits is None else limits)
        tried = []
        for tile in self.tiles or ({},):
            kind = tile.get("adapter")
            if kind is not None and kind != ("cpu" if lim.get("cpu") else "gpu"):
                continue
            tile = {k: v for k, v in tile.items() if k != "adapter"}
            # The tile's own knobs first: the registered ones may be expressions of them.
            spec = dict(tile)
            spec.update((k, v) for k, v in self.overrides.items() if k not in tile)
            spec.update(overrides or {})
            knobs: Dict[str, int] = {}
            for k, v in spec.items():
                knobs[k] = _evaluate(v, {**sizes, **knobs}) if isinstance(v, str) else int(v)  # type: ignore[arg-type]
            if not self.tiles:
                return knobs
            need = _evaluate(self.storage, {**sizes, **knobs}) if self.storage else 0
            over = [f"{k}={knobs[k]} > {most}" for k, most in self.caps.items() if knobs.get(k, 0) > most]
            over += [f"{c} != 0" for c in self.constraints if _evaluate(c, {**sizes, **knobs}) != 0]
            if not over and need <= lim["max_wg_storage"] and knobs.get("WG", 1) <= lim["max_invocations"]:
                return knobs
            tried.append(f"{tile}: {need} bytes, {knobs.get('WG', 1)} invocations{', ' if over else ''}" + ", ".join(over))
        raise DoesNotFit(
            f"{self.id}: no tile shape fits an adapter with {lim['max_wg_storage']} bytes of workgroup "
            f"storage and {lim['max_invocations']} invocations ({'; '.join(tried)}); choose another "
            f"implementation of {self.interface.name}"
        )

    def dispatches(
        self,
        values: Mapping[str, float],
        buffers: Mapping[int, str],
        source: Optional[str] = None,
        entry_points: Optional[Mapping[str, str]] = None,
        overrides: Optional[Mapping[str, int]] = None,
    ) -> List["Dispatch"]:
        """The interface's passes as dispatches of this kernel (or of WGSL `source` implementing
        the same interface; `entry_points` renames passes' entry points, `overrides` replaces
        the override constants). `buffers` maps binding index to buffer name."""
        from .plan import Dispatch

        sizes = {
            k: int(v) for k, v in values.items() if isinstance(v, numbers.Integral) and not isinstance(v, bool)
        }  # numpy ints too
        src = self.source(sizes) if source is None else source
        for name, most in self.limits.items():
            if sizes.get(name, 0) > most:
                raise DoesNotFit(
                    f"{self.id} supports {name} <= {most}, got {sizes[name]}; "
                    f"choose another implementation of {self.interface.name}"
                )
        knobs = self.knobs(sizes, overrides)
        # Only overrides the shader declares become pipeline constants (WebGPU rejects others);
        # a kernel with a literal @workgroup_size still gets its grid from the same names.
        constants = {k: v for k, v in knobs.items() if re.search(r"\boverride\s+%s\b" % k, src)}
        out = []
        for p in self.interface.passes:
            if p.name in self.grids:  # this kernel's blocking sets how many workgroups a pass needs
                p = replace(p, grid=self.grids[p.name])
            entry = (entry_points or {}).get(p.name, p.entry_point)
            names = dict(knobs)
            literal = literal_workgroup_size(src, entry)
            if literal is not None:
                names["WG"] = literal
            out.append(
                Dispatch(
                    label=f"{self.id}.{p.name}",
                    source=src,
                    entry_point=entry,
                    constants=constants,
                    bindings={i: buffers[i] for i in p.uses},
                    layout=self.interface.layout(p.uses),
                    workgroups=p.workgroups(sizes, names),
                    requires=self.requires,
                    # A user's WGSL is checked; so are overrides, unless the kernel's tile candidates
                    # come with caps and constraints that knobs() enforced on them.
                    trusted=self.trusted and source is None and (not overrides or bool(self.tiles)),
                )
            )
        return out


@dataclass(frozen=True)
class Registry:
    interfaces: Mapping[str, Interface]
    kernels: Mapping[str, Kernel]

    def kernel(self, kernel_id: str) -> Kernel:
        try:
            return self.kernels[kernel_id]
        except KeyError:
            raise ValueError(f"unknown kernel {kernel_id!r}; registered: {sorted(self.kernels)}") from None

    def interface(self, name: str) -> Interface:
        try:
            return self.interfaces[name]
        except KeyError:
            raise ValueError(f"unknown interface {name!r}; registered: {sorted(self.interfaces)}") from None

    def kernels_of(self, interface: str) -> List[Kernel]:
        return [k for k in self.kernels.values() if k.interface.name == interface]

    def user_kernel(self, interface: str, summary: str = "user WGSL") -> Kernel:
        """A stand-in for WGSL a user wrote against `interface`: it borrows the knobs (WG, ...)
        of the interface's first registered kernel; the source is passed at plan time."""
        iface = self.interface(interface)
        base = self.kernels_of(interface)
        return Kernel(
            id=f"user.{interface}",
            interface=iface,
            summary=summary,
            overrides=dict(base[0].overrides) if base else {},
            requires=(),
        )


_CACHE: Dict[str, Registry] = {}


def literal_workgroup_size(source: str, entry: str) -> Optional[int]:
    """The invocation count of `entry` when its @workgroup_size is made of integer literals
    (a user's kernel, say), else None (an override: the registry knows it)."""
    m = re.search(r"@workgroup_size\(([^)]*)\)[^{]*?fn\s+%s\s*\(" % re.escape(entry), source, re.S)
    if not m:
        return None
    dims = [d.strip().rstrip("u") for d in m.group(1).split(",") if d.strip()]
    if not all(d.isdigit() for d in dims):
        return None
    count = 1
    for d in dims:
        count *= int(d)
    return count


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
                passes=tuple(
                    Pass(name=p["name"], entry_point=p["entry_point"], uses=tuple(p["uses"]), grid=dict(p["grid"]))
                    for p in spec["passes"]
                ),
            )
            for name, spec in raw["interfaces"].items()
        }
        kernels = {
            kid: Kernel(
                id=kid,
                interface=interfaces[spec["interface"]],
                summary=spec["summary"],
                overrides=dict(spec.get("overrides", {})),
                requires=tuple(spec.get("requires", ())),
                limits=dict(spec.get("limits", {})),
                precision=spec.get("precision", "f32"),
                template=spec.get("template", ""),
                defines=dict(spec.get("defines", {})),
                tiles=tuple(dict(t) for t in spec.get("tiles", ())),
                storage=spec.get("storage", ""),
                caps=dict(spec.get("caps", {})),
                constraints=tuple(spec.get("constraints", ())),
                trusted=bool(spec.get("trusted", False)),
                grids={name: dict(g) for name, g in spec.get("grid", {}).items()},
            )
            for kid, spec in raw["kernels"].items()
        }
        _CACHE[key] = Registry(interfaces=interfaces, kernels=kernels)
    return _CACHE[key]


def _evaluate(expr: str, names: Mapping[str, int]) -> int:
    """Integer arithmetic on registry names: + - * // %, ceil_div(a, b), min and max, nothing else."""

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
            if isinstance(node.op, ast.Mod):
                return a % b
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "ceil_div" and len(node.args) == 2:
            a, b = ev(node.args[0]), ev(node.args[1])
            return -(-a // b)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("min", "max")
            and len(node.args) == 2
        ):
            pick = min if node.func.id == "min" else max
            return pick(ev(node.args[0]), ev(node.args[1]))
        raise ValueError(f"grid expression {expr!r}: unsupported syntax")

    return ev(ast.parse(expr, mode="eval"))
