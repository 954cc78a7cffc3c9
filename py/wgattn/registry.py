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
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from .errors import DoesNotFit, InterfaceMismatch
from .plan import Dispatch
from .wgsl import preprocess, reader

__all__ = [
    "Binding",
    "Param",
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
_BINDING_KINDS = ("storage", "uniform")
_ACCESS = ("read", "read_write")

# An override constant or define: an int, or an expression of the params (and earlier knobs).
Knob = Union[int, str]

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
class Binding:
    """One `@group(0) @binding(i)` variable of an interface, as the manifest lists it."""

    binding: int  # the @binding index
    name: str  # the WGSL variable's name, and the name of the plan buffer bound to it
    kind: str  # "storage" or "uniform"
    access: str = "read"  # "read" or "read_write" (storage); "read" for a uniform
    element: str = ""  # a storage array's element type (f32, i32, u32, vec4<f32>)
    struct: str = ""  # a uniform's struct type (Params)

    @property
    def buffer_type(self) -> str:
        """The WebGPU buffer binding type of an explicit bind group layout."""
        if self.kind == "uniform":
            return "uniform"
        return "storage" if self.access == "read_write" else "read-only-storage"


@dataclass(frozen=True)
class Param:
    """One field of an interface's uniform `Params` struct (every field a 4-byte scalar)."""

    name: str
    type: str  # WGSL scalar type: u32, i32 or f32
    offset: int  # bytes from the start of the struct

    size = 4  # bytes; a class constant, not a field

    @property
    def padding(self) -> bool:
        """Padding fields are named `_...` in the manifest and the WGSL; they are always 0."""
        return self.name.startswith("_")


@dataclass(frozen=True)
class Interface:
    """A binding contract that any kernel (the project's or a user's) can implement."""

    name: str
    summary: str
    reference: str
    conventions: Mapping[str, str]
    bindings: Tuple[Binding, ...]
    params: Tuple[Param, ...]
    passes: Tuple["Pass", ...]

    def layout(self, uses: Tuple[int, ...]) -> List[Tuple[int, str]]:
        """(binding, WebGPU buffer binding type) for the bindings one pass uses: explicit layouts,
        so a kernel that leaves a binding unused still binds."""
        types = {b.binding: b.buffer_type for b in self.bindings}
        return [(i, types[i]) for i in uses]

    def bind(self, buffer_names: Iterable[str]) -> Dict[int, str]:
        """{binding index: buffer name} for a plan whose buffers are named after the bindings;
        InterfaceMismatch when a binding has no buffer or a buffer no binding (the manifest and
        the interface module disagree: a programming error, said plainly)."""
        have = list(buffer_names)
        wanted = [b.name for b in self.bindings]
        missing = [n for n in wanted if n not in have]
        unbound = [n for n in have if n not in wanted]
        if missing or unbound:
            raise InterfaceMismatch(
                f"{self.name}: the plan's buffers {have} do not match the interface's bindings {wanted}"
                f" (without a buffer: {missing}; bound to nothing: {unbound})"
            )
        return {b.binding: b.name for b in self.bindings}

    @property
    def params_size(self) -> int:
        return sum(p.size for p in self.params)

    @property
    def padding(self) -> Tuple[str, ...]:
        """The Params fields that are padding (named `_...` in the manifest and the WGSL): 0."""
        return tuple(p.name for p in self.params if p.padding)

    def pack_params(self, values: Mapping[str, float]) -> bytes:
        """The uniform `Params` bytes. `values` gives every field except the padding ones (named
        `_...`), which are 0; a missing, unknown or padding field is a ValueError naming it, so a
        plan that forgets a field fails instead of sending 0 to the kernel."""
        padding = set(self.padding)
        fields = {p.name for p in self.params}
        unknown = set(values) - fields
        if unknown:
            raise InterfaceMismatch(f"{self.name}: unknown params {sorted(unknown)}")
        given_padding = set(values) & padding
        if given_padding:
            raise InterfaceMismatch(f"{self.name}: params {sorted(given_padding)} are padding (always 0)")
        missing = [p.name for p in self.params if p.name not in values and not p.padding]
        if missing:
            raise InterfaceMismatch(
                f"{self.name}: params {missing} are missing (every field but the padding {sorted(padding)} must be given)"
            )
        out = bytearray(self.params_size)
        for p in self.params:
            value = values.get(p.name, 0)
            if p.type == "f32":
                struct.pack_into("<f", out, p.offset, float(value))
            else:
                ivalue = int(value)
                lo, hi = (0, 2**32 - 1) if p.type == "u32" else (-(2**31), 2**31 - 1)
                if not lo <= ivalue <= hi:
                    raise ValueError(f"{self.name}: param {p.name}={ivalue} does not fit in {p.type}")
                struct.pack_into("<" + _FIELD_FORMATS[p.type], out, p.offset, ivalue)
        return bytes(out)


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
    overrides: Mapping[str, Knob]  # name -> int, or an expression of the params
    requires: Tuple[str, ...]
    # The native API's preference among the kernels of one reference op (higher first); unique
    # per op. A user's kernel is unranked (0): it is never chosen automatically.
    rank: int = 0
    limits: Mapping[str, int] = field(default_factory=dict)  # param -> largest value supported
    precision: str = "f32"  # "f16": computes in half precision (judged on f16-rounded inputs)
    template: str = ""  # the .wgsl file (without suffix) when it is not the kernel id
    # for #if in the template: an int, or an expression of the params (a variant per size class)
    defines: Mapping[str, Knob] = field(default_factory=dict)
    # Tile candidates, best first: each overrides `overrides`; the first whose workgroup storage
    # (the `storage` expression, bytes) and invocations (WG) fit the target adapter is used. A
    # candidate with "adapter": "cpu" (or "gpu") is only for software (or hardware) adapters.
    tiles: Tuple[Mapping[str, Knob], ...] = ()
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
        defines = {k: (_evaluate(v, sizes or {}) if isinstance(v, str) else int(v)) for k, v in self.defines.items()}
        return preprocess(self.path.read_text(), defines, reader(shader_dir()), self.path.name)

    def knobs(
        self,
        sizes: Mapping[str, int],
        overrides: Optional[Mapping[str, Knob]] = None,
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
            spec: Dict[str, Knob] = dict(tile)
            spec.update((k, v) for k, v in self.overrides.items() if k not in tile)
            spec.update(overrides or {})
            knobs: Dict[str, int] = {}
            for k, v in spec.items():
                knobs[k] = _evaluate(v, {**sizes, **knobs}) if isinstance(v, str) else int(v)
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
    ) -> List[Dispatch]:
        """The interface's passes as dispatches of this kernel (or of WGSL `source` implementing
        the same interface; `entry_points` renames passes' entry points, `overrides` replaces
        the override constants). `buffers` maps binding index to buffer name (Interface.bind)."""
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
        constants: Dict[str, float] = {k: v for k, v in knobs.items() if re.search(r"\boverride\s+%s\b" % k, src)}
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

    def ranked(self, op: str) -> List[Kernel]:
        """The kernels of every interface whose reference is `op` (e.g. "varlen_attention_fwd"),
        highest rank first: the order the native API tries them in (load() made ranks unique)."""
        found = [k for k in self.kernels.values() if k.interface.reference == op]
        if not found:
            raise ValueError(f"unknown op {op!r}; ops: {sorted({i.reference for i in self.interfaces.values()})}")
        return sorted(found, key=lambda k: -k.rank)

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
    """Parse and check manifest.json (cached per path): a ValueError names the entry at fault."""
    path = Path(path) if path is not None else shader_dir() / "manifest.json"
    key = str(path)
    if key not in _CACHE:
        _CACHE[key] = _parse(json.loads(path.read_text()), path.name)
    return _CACHE[key]


# --- Parsing the manifest: every field's type checked once, here ------------------------------

_REQUIRED = object()


def _field(spec: Mapping[str, Any], key: str, kind: Any, at: str, default: Any = _REQUIRED) -> Any:
    """spec[key] when it is a `kind` (bool is no int here), `default` when absent and allowed."""
    if key not in spec:
        if default is _REQUIRED:
            raise ValueError(f"{at}: {key!r} is missing")
        return default
    value = spec[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise ValueError(f"{at}: {key!r} must be {' or '.join(t.__name__ for t in kinds)}, got {value!r}")
    return value


def _knobs(spec: Mapping[str, Any], key: str, at: str) -> Dict[str, Knob]:
    """A {name: int or expression} table (overrides, defines, a tile)."""
    table = _field(spec, key, dict, at, {})
    for name in table:
        _field(table, name, (int, str), f"{at}.{key}")
    return dict(table)


def _binding(b: Any, at: str) -> Binding:
    if not isinstance(b, dict):
        raise ValueError(f"{at}: a binding must be an object, got {b!r}")
    unknown = sorted(set(b) - {"binding", "name", "kind", "access", "element", "struct"})
    if unknown:
        raise ValueError(f"{at}: unknown keys {unknown}")
    index = _field(b, "binding", int, at)
    kind = _field(b, "kind", str, at)
    if index < 0 or kind not in _BINDING_KINDS:
        raise ValueError(f"{at}: binding must be >= 0 and kind one of {list(_BINDING_KINDS)}, got {index}, {kind!r}")
    access = _field(b, "access", str, at, "read")
    if access not in _ACCESS or (kind == "uniform" and access != "read"):
        raise ValueError(f"{at}: access must be one of {list(_ACCESS)} (a uniform's is read), got {access!r}")
    return Binding(
        index, _field(b, "name", str, at), kind, access, _field(b, "element", str, at, ""), _field(b, "struct", str, at, "")
    )


def _interface(name: str, spec: Any, at: str) -> Interface:
    if not isinstance(spec, dict):
        raise ValueError(f"{at}: must be an object")
    bindings = tuple(_binding(b, f"{at}.bindings[{i}]") for i, b in enumerate(_field(spec, "bindings", list, at)))
    for attr in ("binding", "name"):
        seen = [getattr(b, attr) for b in bindings]
        dup = sorted({x for x in seen if seen.count(x) > 1}, key=str)
        if dup:
            raise ValueError(f"{at}.bindings: {attr} {dup} listed twice")
    params: List[Param] = []
    for i, f in enumerate(_field(spec, "params", list, at)):
        if not (isinstance(f, list) and len(f) == 2 and isinstance(f[0], str) and f[1] in _FIELD_FORMATS):
            raise ValueError(f"{at}.params[{i}]: must be [name, type] with type one of {list(_FIELD_FORMATS)}, got {f!r}")
        params.append(Param(f[0], f[1], offset=sum(p.size for p in params)))
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise ValueError(f"{at}.params: a field is listed twice in {names}")
    passes = []
    for i, p in enumerate(_field(spec, "passes", list, at)):
        where = f"{at}.passes[{i}]"
        uses = tuple(_field(p, "uses", list, where))
        if not set(uses) <= {b.binding for b in bindings}:
            raise ValueError(f"{where}: uses {list(uses)} name bindings the interface lacks")
        grid = _field(p, "grid", dict, where)
        passes.append(Pass(_field(p, "name", str, where), _field(p, "entry_point", str, where), uses, dict(grid)))
    return Interface(
        name=name,
        summary=_field(spec, "summary", str, at),
        reference=_field(spec, "reference", str, at),
        conventions=dict(_field(spec, "conventions", dict, at, {})),
        bindings=bindings,
        params=tuple(params),
        passes=tuple(passes),
    )


def _kernel(kid: str, spec: Any, interfaces: Mapping[str, Interface], at: str) -> Kernel:
    if not isinstance(spec, dict):
        raise ValueError(f"{at}: must be an object")
    iface = _field(spec, "interface", str, at)
    if iface not in interfaces:
        raise ValueError(f"{at}: interface {iface!r} is not registered; registered: {sorted(interfaces)}")
    return Kernel(
        id=kid,
        interface=interfaces[iface],
        summary=_field(spec, "summary", str, at),
        rank=_field(spec, "rank", int, at),
        overrides=_knobs(spec, "overrides", at),
        requires=tuple(_field(spec, "requires", list, at, [])),
        limits=dict(_field(spec, "limits", dict, at, {})),
        precision=_field(spec, "precision", str, at, "f32"),
        template=_field(spec, "template", str, at, ""),
        defines=_knobs(spec, "defines", at),
        tiles=tuple(_knobs({"tile": t}, "tile", f"{at}.tiles[{i}]") for i, t in enumerate(_field(spec, "tiles", list, at, []))),
        storage=_field(spec, "storage", str, at, ""),
        caps=dict(_field(spec, "caps", dict, at, {})),
        constraints=tuple(_field(spec, "constraints", list, at, [])),
        trusted=_field(spec, "trusted", bool, at, False),
        grids={name: dict(g) for name, g in _field(spec, "grid", dict, at, {}).items()},
    )


def _parse(raw: Any, source: str) -> Registry:
    if not isinstance(raw, dict):
        raise ValueError(f"{source}: must be an object with interfaces and kernels")
    interfaces = {
        name: _interface(name, spec, f"{source}: interfaces.{name}")
        for name, spec in _field(raw, "interfaces", dict, source).items()
    }
    kernels = {
        kid: _kernel(kid, spec, interfaces, f"{source}: kernels.{kid}")
        for kid, spec in _field(raw, "kernels", dict, source).items()
    }
    # A total order per op: the native API must never pick between two kernels by accident.
    first: Dict[Tuple[str, int], str] = {}
    for k in kernels.values():
        other = first.setdefault((k.interface.reference, k.rank), k.id)
        if other != k.id:
            raise ValueError(
                f"{source}: kernels.{k.id}: rank {k.rank} is also kernels.{other}'s; ranks must be unique among "
                f"the kernels of op {k.interface.reference!r} (they order the native API's choice)"
            )
    return Registry(interfaces=interfaces, kernels=kernels)


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
