"""The kernel registry: shaders/manifest.json and the WGSL it names, read once and shared by every
runtime.

One kernel id (e.g. "sdpa_arena.seed") names the WGSL file shaders/<id>.wgsl, its registry entry,
its GPU labels and its test ids. An interface's binary side (`Abi`) is its WGSL header,
shaders/interfaces/<name>.wgsl, which declares the uniform `Params` struct and the bindings, and
which every kernel of the interface #includes; the manifest adds what WGSL cannot say (the
reference function, the passes and their dispatch grids). A kernel's workgroup storage,
invocations and array caps are read from its WGSL too (wgattn.wgsl): nothing the WGSL declares is
restated here.
"""

from __future__ import annotations

import json
import numbers
import os
import struct
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Set, Tuple, Union

from . import wgsl
from .errors import DoesNotFit, InterfaceMismatch
from .expr import evaluate, product_terms
from .plan import BindingType, Dispatch
from .target import Target

__all__ = ["Binding", "Param", "Abi", "Kernel", "Pass", "Registry", "load", "shader_dir", "header_path"]

# WGSL scalar types a Params field may have, as struct format characters (little-endian, 4 bytes).
_FIELD_FORMATS = {"u32": "I", "i32": "i", "f32": "f"}
_F32_MAX = 3.4028234663852886e38

# An override constant or define: an int, or an expression of the params (and earlier knobs).
Knob = Union[int, str]


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


def header_path(interface: str) -> str:
    """The interface's WGSL header, relative to the shaders folder (what a kernel #includes)."""
    return f"interfaces/{interface}.wgsl"


@dataclass(frozen=True)
class Binding:
    """One `@group(0) @binding(i)` variable of an interface, as its header declares it."""

    binding: int  # the @binding index
    name: str  # the WGSL variable's name, and the name of the plan buffer bound to it
    kind: str  # "storage" or "uniform"
    access: str = "read"  # "read" or "read_write" (storage); "read" for a uniform
    element: str = ""  # a storage array's element type (f32, i32, u32, vec4<f32>)
    struct: str = ""  # a uniform's struct type (Params)

    @property
    def buffer_type(self) -> BindingType:
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
        """Padding fields are named `_...` in the header; they are always 0."""
        return self.name.startswith("_")


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
        items = evaluate(self.grid["items"], names)
        per_wg = evaluate(self.grid.get("per_workgroup", "1"), names)
        count = -(-items // per_wg)
        if count <= max_per_dim:
            return (max(count, 1), 1, 1)
        y = -(-count // max_per_dim)
        if y > max_per_dim:
            raise ValueError(f"{self.entry_point}: {count} workgroups exceed {max_per_dim} x {max_per_dim}; use fewer rows")
        return (max_per_dim, y, 1)


@dataclass(frozen=True)
class Abi:
    """An interface's binary side, which any kernel (the project's or a user's) can implement:
    the bindings and Params its header declares, the passes and grids the manifest gives."""

    name: str
    summary: str
    reference: str  # the wgattn.reference function it computes
    conventions: Mapping[str, str]
    bindings: Tuple[Binding, ...]
    params: Tuple[Param, ...]
    passes: Tuple[Pass, ...]

    @property
    def header(self) -> str:
        return header_path(self.name)

    @property
    def uniform(self) -> Binding:
        """The binding of the Params struct."""
        return next(b for b in self.bindings if b.kind == "uniform")

    def layout(self, uses: Tuple[int, ...]) -> List[Tuple[int, BindingType]]:
        """(binding, WebGPU buffer binding type) for the bindings one pass uses: explicit layouts,
        so a kernel that leaves a binding unused still binds."""
        types = {b.binding: b.buffer_type for b in self.bindings}
        return [(i, types[i]) for i in uses]

    def bind(self, buffer_names: Iterable[str]) -> Dict[int, str]:
        """{binding index: buffer name} for a plan whose buffers are named after the bindings;
        InterfaceMismatch when a binding has no buffer or a buffer no binding (a programming error
        of the interface, said plainly)."""
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
        """The Params fields that are padding (named `_...` in the header): 0."""
        return tuple(p.name for p in self.params if p.padding)

    def pack_params(self, values: Mapping[str, float]) -> bytes:
        """The uniform `Params` bytes. `values` gives every field except the padding ones (named
        `_...`), which are 0; a missing, unknown or padding field is an InterfaceMismatch naming
        it, so a plan that forgets a field fails instead of sending 0 to the kernel, and a value
        its type cannot hold a ValueError naming the field."""
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
                x = float(value)
                if not abs(x) <= _F32_MAX:  # NaN too: struct would raise OverflowError or pack inf
                    raise ValueError(f"{self.name}: param {p.name}={value!r} does not fit in f32")
                struct.pack_into("<f", out, p.offset, x)
            else:
                ivalue = int(value)
                lo, hi = (0, 2**32 - 1) if p.type == "u32" else (-(2**31), 2**31 - 1)
                if not lo <= ivalue <= hi:
                    raise ValueError(f"{self.name}: param {p.name}={ivalue} does not fit in {p.type}")
                struct.pack_into("<" + _FIELD_FORMATS[p.type], out, p.offset, ivalue)
        return bytes(out)


@dataclass(frozen=True)
class Fit:
    """The override constants a kernel runs with, and what they need of the adapter."""

    knobs: Dict[str, int]
    storage: int  # bytes of workgroup storage, the most any pass needs
    invocations: int  # invocations per workgroup, the most any pass needs


@dataclass(frozen=True)
class Kernel:
    """One WGSL implementation of an interface."""

    id: str
    interface: str  # the interface's name (wgattn.interfaces.get(name) is its object)
    abi: Abi
    summary: str
    overrides: Mapping[str, Knob]  # name -> int, or an expression of the params
    requires: Tuple[str, ...]
    # The native API's preference among the kernels of one reference op (higher first); unique
    # per op. A user's kernel is unranked (0): it is never chosen automatically.
    rank: int = 0
    limits: Mapping[str, int] = field(default_factory=dict)  # param -> largest value supported
    precision: str = "f32"  # "f16": computes in half precision (judged on f16-rounded inputs)
    # What an "f16" kernel holds in float16, each a product of the interface's magnitudes and
    # constants (e.g. "4 * v"): each must stay within float16's range (wgattn.ranges.half).
    half: Tuple[str, ...] = ()
    template: str = ""  # the .wgsl file (without suffix) when it is not the kernel id
    # for #if and #const in the template: an int, or an expression of the params (a variant per
    # size class) and of the knobs (a register array sized for the tile the plan chose)
    defines: Mapping[str, Knob] = field(default_factory=dict)
    # Tile candidates, best first: each overrides `overrides`; the first whose caps, constraints,
    # workgroup storage and invocations fit the target is used. A candidate with "adapter": "cpu"
    # (or "gpu") is only for software (or hardware) adapters.
    tiles: Tuple[Mapping[str, Knob], ...] = ()
    constraints: Tuple[str, ...] = ()  # expressions of the knobs that must be 0 (e.g. "BC % NCG")
    # May be compiled without runtime bounds checks (wgattn.native's trusted mode): every index the
    # kernel makes is guarded in its own code, given inputs the interface validated.
    trusted: bool = False
    grids: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # pass -> its own grid
    # (component, result) of the subgroup matrix configuration it needs (wgattn.target); the plan
    # exposes the chosen one's sizes to the knob and define expressions as SGM_M, SGM_N and SGM_K,
    # and the adapter's (fixed) subgroup size as SUBGROUP_SIZE.
    matrix: Optional[Tuple[str, str]] = None
    folder: Optional[Path] = None  # the shaders folder it was registered from (default: shader_dir())

    @property
    def path(self) -> Path:
        return (self.folder or shader_dir()) / f"{self.template or self.id}.wgsl"

    def source(
        self,
        sizes: Optional[Mapping[str, int]] = None,
        target: Optional[Target] = None,
        knobs: Optional[Mapping[str, int]] = None,
    ) -> str:
        """The WGSL both runtimes compile: the template with includes and this kernel's defines
        (evaluated on the params `sizes`, what `target_names` takes from `target` and the
        override constants `knobs` (`fit`'s), where they are expressions) expanded
        (wgattn.wgsl). InterfaceMismatch when the template does not include its interface's
        header; ValueError when a define names a knob and `knobs` is not given."""
        names = {**(sizes or {}), **(self.target_names(target) if target is not None else {}), **(knobs or {})}
        defines = {k: (evaluate(v, names) if isinstance(v, str) else int(v)) for k, v in self.defines.items()}
        seen: Set[str] = set()
        text = wgsl.preprocess(self.path.read_text(), defines, wgsl.reader(self.folder or shader_dir()), self.path.name, seen)
        if self.abi.header not in seen:
            raise InterfaceMismatch(
                f'{self.path.name} does not #include "{self.abi.header}": a kernel of {self.interface} declares '
                "its Params and bindings through the interface's header"
            )
        return text

    def user_source(self, text: str) -> str:
        """WGSL a user wrote against this kernel's interface, its directives expanded: it may
        `#include "interfaces/<name>.wgsl"` (the Params struct and bindings) and the lib/ helpers."""
        return wgsl.preprocess(text, {}, wgsl.reader(self.folder or shader_dir()), "the user's WGSL")

    def caps(self, source: str, chosen: Optional[Mapping[str, int]] = None) -> Dict[str, int]:
        """knob -> the most the WGSL's private arrays hold (`const MAX_<knob>: u32 = N;`), for the
        knobs this kernel sets (and those its interface `chosen` for a target)."""
        settable = set(self.overrides) | {name for tile in self.tiles for name in tile} | set(chosen or ())
        return {name[4:]: n for name, n in wgsl.consts(source).items() if name.startswith("MAX_") and name[4:] in settable}

    def knobs(
        self,
        sizes: Mapping[str, int],
        target: Target,
        overrides: Optional[Mapping[str, Knob]] = None,
        source: Optional[str] = None,
    ) -> Dict[str, int]:
        """The override constants for params `sizes` on `target` (`fit`'s)."""
        return self.fit(sizes, target, overrides, source).knobs

    def fit(
        self,
        sizes: Mapping[str, int],
        target: Target,
        overrides: Optional[Mapping[str, Knob]] = None,
        source: Optional[str] = None,
        entry_points: Optional[Mapping[str, str]] = None,
        chosen: Optional[Mapping[str, int]] = None,
    ) -> Fit:
        """The override constants for params `sizes` on `target`. A knob may be an expression of
        the params and of the knobs before it (tile shapes that follow head_dim); `overrides`
        replaces the registered values it names. The first tile candidate (or the registered
        knobs, without candidates) whose caps and constraints hold and whose workgroup storage
        and invocations, read from the WGSL (`source`, default: this kernel's), fit the target is
        taken; DoesNotFit lists every candidate tried. `chosen`, knobs the interface chose for
        the target (Interface.layout_on), is the one candidate instead, held to the same checks."""
        names: Dict[str, int] = {**sizes, **self.target_names(target)}
        entries = [(entry_points or {}).get(p.name, p.entry_point) for p in self.abi.passes]
        max_storage = target.limit("max-compute-workgroup-storage-size")
        max_invocations = target.limit("max-compute-invocations-per-workgroup")
        tried = []
        for tile in [dict(chosen)] if chosen else self.tiles or ({},):
            kind = tile.get("adapter")
            if kind is not None and kind != ("cpu" if target.software else "gpu"):
                continue
            tile = {k: v for k, v in tile.items() if k != "adapter"}
            # The tile's own knobs first: the registered ones may be expressions of them.
            spec: Dict[str, Knob] = dict(tile)
            spec.update((k, v) for k, v in self.overrides.items() if k not in tile)
            spec.update(overrides or {})
            knobs: Dict[str, int] = {}
            for k, v in spec.items():
                knobs[k] = evaluate(v, {**names, **knobs}) if isinstance(v, str) else int(v)
            scope = {**names, **knobs}
            src = self.source(sizes, target, knobs) if source is None else source  # defines may name knobs
            caps = self.caps(src, chosen)
            storage = max((wgsl.workgroup_storage(src, e, scope) for e in entries), default=0)
            invocations = max((self._invocations(src, e, scope) for e in entries), default=1)
            over = [f"{k}={knobs[k]} > {most}" for k, most in caps.items() if knobs.get(k, 0) > most]
            over += [f"{c} != 0" for c in self.constraints if evaluate(c, scope) != 0]
            if not over and storage <= max_storage and invocations <= max_invocations:
                return Fit(knobs, storage, invocations)
            tried.append(f"{tile}: {storage} bytes, {invocations} invocations{', ' if over else ''}" + ", ".join(over))
        raise DoesNotFit(
            f"{self.id}: no tile shape fits an adapter with {max_storage} bytes of workgroup "
            f"storage and {max_invocations} invocations ({'; '.join(tried)}); choose another "
            f"implementation of {self.interface}"
        )

    def target_names(self, target: Target) -> Dict[str, int]:
        """What a kernel that needs subgroup matrices takes from `target` (SGM_M, SGM_N, SGM_K,
        SUBGROUP_SIZE); nothing for other kernels. DoesNotFit saying what the target lacks."""
        if self.matrix is None:
            return {}
        config = target.matrix(*self.matrix)
        if config is None or not target.subgroup_size():
            raise DoesNotFit(target.lacks(self) or f"{self.id}: no subgroup matrix configuration fits")
        return {"SGM_M": config.m, "SGM_N": config.n, "SGM_K": config.k, "SUBGROUP_SIZE": target.subgroup_size()}

    @staticmethod
    def _invocations(source: str, entry: str, names: Mapping[str, int]) -> int:
        size = wgsl.workgroup_size(source, entry)
        return 1 if size is None else evaluate(size, names)

    def dispatches(
        self,
        values: Mapping[str, float],
        buffers: Mapping[int, str],
        target: Target,
        source: Optional[str] = None,
        entry_points: Optional[Mapping[str, str]] = None,
        overrides: Optional[Mapping[str, int]] = None,
        chosen: Optional[Mapping[str, int]] = None,
    ) -> List[Dispatch]:
        """The interface's passes as dispatches of this kernel on `target` (or of WGSL `source`
        implementing the same interface; `entry_points` renames passes' entry points,
        `overrides` replaces the override constants; `chosen`: the interface's own choice of
        them for the target, fit()'s one candidate). `buffers` maps binding index to buffer
        name (Abi.bind). DoesNotFit when the sizes pass a limit of the kernel or no tile fits."""
        sizes = {
            k: int(v) for k, v in values.items() if isinstance(v, numbers.Integral) and not isinstance(v, bool)
        }  # numpy ints too
        user = None if source is None else self.user_source(source)
        for name, most in self.limits.items():
            if sizes.get(name, 0) > most:
                what = (
                    f"does not support {name} = {sizes[name]}" if most == 0 else f"supports {name} <= {most}, got {sizes[name]}"
                )
                raise DoesNotFit(f"{self.id} {what}; choose another implementation of {self.interface}")
        fit = self.fit(sizes, target, overrides, user, entry_points, chosen)
        knobs = fit.knobs
        src = self.source(sizes, target, knobs) if user is None else user
        # Only overrides the shader declares become pipeline constants (WebGPU rejects others);
        # a kernel with a literal @workgroup_size still gets its grid from the same names.
        declared = set(wgsl.overrides(src))
        constants: Dict[str, float] = {k: v for k, v in knobs.items() if k in declared}
        out = []
        for p in self.abi.passes:
            if p.name in self.grids:  # this kernel's blocking sets how many workgroups a pass needs
                p = replace(p, grid=self.grids[p.name])
            entry = (entry_points or {}).get(p.name, p.entry_point)
            names = dict(knobs)
            literal = wgsl.literal_workgroup_size(src, entry)
            if literal is not None:  # a literal @workgroup_size (a user's kernel)
                names["WG"] = literal
            out.append(
                Dispatch(
                    label=f"{self.id}.{p.name}",
                    source=src,
                    entry_point=entry,
                    constants=constants,
                    bindings={i: buffers[i] for i in p.uses},
                    layout=self.abi.layout(p.uses),
                    workgroups=p.workgroups(sizes, names),
                    requires=self.requires,
                    # A user's WGSL is checked; so are overrides, unless the kernel's tile candidates
                    # (or the interface's chosen knobs) come with caps and constraints that fit()
                    # enforced on them.
                    trusted=self.trusted and source is None and (not overrides or bool(self.tiles or chosen)),
                    workgroup_storage=wgsl.workgroup_storage(src, entry, {**sizes, **knobs}),
                    invocations=self._invocations(src, entry, {**sizes, **knobs}),
                )
            )
        return out


@dataclass(frozen=True)
class Registry:
    abis: Mapping[str, Abi]
    kernels: Mapping[str, Kernel]

    def kernel(self, kernel_id: str) -> Kernel:
        try:
            return self.kernels[kernel_id]
        except KeyError:
            raise ValueError(f"unknown kernel {kernel_id!r}; registered: {sorted(self.kernels)}") from None

    def abi(self, name: str) -> Abi:
        try:
            return self.abis[name]
        except KeyError:
            raise ValueError(f"unknown interface {name!r}; registered: {sorted(self.abis)}") from None

    def kernels_of(self, interface: str) -> List[Kernel]:
        return [k for k in self.kernels.values() if k.interface == interface]

    def ranked(self, op: str) -> List[Kernel]:
        """The kernels of every interface whose reference is `op` (e.g. "varlen_attention_fwd"),
        highest rank first: the order the native API tries them in (load() made ranks unique)."""
        found = [k for k in self.kernels.values() if k.abi.reference == op]
        if not found:
            raise ValueError(f"unknown op {op!r}; ops: {sorted({a.reference for a in self.abis.values()})}")
        return sorted(found, key=lambda k: -k.rank)

    def user_kernel(self, interface: str, summary: str = "user WGSL") -> Kernel:
        """A stand-in for WGSL a user wrote against `interface`: it borrows the knobs (WG, ...)
        of the interface's first registered kernel; the source is passed at plan time."""
        abi = self.abi(interface)
        base = self.kernels_of(interface)
        return Kernel(
            id=f"user.{interface}",
            interface=interface,
            abi=abi,
            summary=summary,
            overrides=dict(base[0].overrides) if base else {},
            requires=(),
        )


_CACHE: Dict[str, Registry] = {}


def load(path: Optional[Path] = None) -> Registry:
    """Parse and check manifest.json and the interfaces' headers (cached per path): a ValueError
    names the entry at fault."""
    path = Path(path) if path is not None else shader_dir() / "manifest.json"
    key = str(path)
    if key not in _CACHE:
        _CACHE[key] = _parse(json.loads(path.read_text()), path.name, path.parent)
    return _CACHE[key]


# --- Parsing the manifest and the headers: every field's type checked once, here -------------

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


def _header(name: str, folder: Path) -> Tuple[Tuple[Binding, ...], Tuple[Param, ...]]:
    """The bindings and Params fields interface `name`'s header declares (its defines off)."""
    rel = header_path(name)
    at = f"{rel}"
    try:
        text = wgsl.preprocess((folder / rel).read_text(), {}, wgsl.reader(folder), rel)
    except FileNotFoundError:
        raise ValueError(f"interface {name}: its header {rel} is missing (the Params struct and bindings)") from None
    found = wgsl.bindings(text)
    if not found:
        raise ValueError(f"{at}: declares no @group(0) @binding(i) variable")
    bindings = []
    for index in sorted(found):
        space, access, var, typ = found[index]
        if space == "uniform":
            bindings.append(Binding(index, var, "uniform", "read", struct=typ))
        elif space == "storage" and typ.startswith("array<") and typ.endswith(">") and access in ("read", "read_write"):
            bindings.append(Binding(index, var, "storage", access, element=typ[6:-1].strip()))
        else:
            raise ValueError(f"{at}: binding {index} ({var}) must be a uniform struct or a storage array, got var<{space}> {typ}")
    uniforms = [b for b in bindings if b.kind == "uniform"]
    if len(uniforms) != 1:
        raise ValueError(f"{at}: must bind exactly one uniform (the Params struct), got {[b.name for b in uniforms]}")
    try:
        fields = wgsl.struct_fields(text, uniforms[0].struct)
    except ValueError:
        raise ValueError(f"{at}: the uniform's struct {uniforms[0].struct} is not declared") from None
    params: List[Param] = []
    for fname, ftype in fields:
        if ftype not in _FIELD_FORMATS:
            raise ValueError(f"{at}: {uniforms[0].struct}.{fname} must be one of {list(_FIELD_FORMATS)}, got {ftype}")
        params.append(Param(fname, ftype, offset=4 * len(params)))
    if sum(p.size for p in params) % 16:
        raise ValueError(f"{at}: {uniforms[0].struct} must be a multiple of 16 bytes (pad with `_` fields)")
    return tuple(bindings), tuple(params)


def _abi(name: str, spec: Any, at: str, folder: Path) -> Abi:
    if not isinstance(spec, dict):
        raise ValueError(f"{at}: must be an object")
    unknown = sorted(set(spec) - {"summary", "reference", "conventions", "passes"})
    if unknown:
        raise ValueError(f"{at}: unknown keys {unknown} (bindings and params are the header's, {header_path(name)})")
    bindings, params = _header(name, folder)
    passes = []
    for i, p in enumerate(_field(spec, "passes", list, at)):
        where = f"{at}.passes[{i}]"
        uses = tuple(_field(p, "uses", list, where))
        if not set(uses) <= {b.binding for b in bindings}:
            raise ValueError(f"{where}: uses {list(uses)} name bindings the interface lacks")
        grid = _field(p, "grid", dict, where)
        passes.append(Pass(_field(p, "name", str, where), _field(p, "entry_point", str, where), uses, dict(grid)))
    return Abi(
        name=name,
        summary=_field(spec, "summary", str, at),
        reference=_field(spec, "reference", str, at),
        conventions=dict(_field(spec, "conventions", dict, at, {})),
        bindings=bindings,
        params=params,
        passes=tuple(passes),
    )


_KERNEL_KEYS = {
    "interface",
    "half",
    "summary",
    "rank",
    "overrides",
    "requires",
    "limits",
    "precision",
    "template",
    "defines",
    "tiles",
    "constraints",
    "trusted",
    "grid",
    "matrix",
}


def _kernel(kid: str, spec: Any, abis: Mapping[str, Abi], at: str, folder: Path) -> Kernel:
    if not isinstance(spec, dict):
        raise ValueError(f"{at}: must be an object")
    unknown = sorted(set(spec) - _KERNEL_KEYS)
    if unknown:
        raise ValueError(f"{at}: unknown keys {unknown} (workgroup storage and caps are read from the WGSL)")
    iface = _field(spec, "interface", str, at)
    if iface not in abis:
        raise ValueError(f"{at}: interface {iface!r} is not registered; registered: {sorted(abis)}")
    precision = _field(spec, "precision", str, at, "f32")
    half = tuple(_field(spec, "half", list, at, []))
    if precision == "f16" and not half:
        raise ValueError(f'{at}: an f16 kernel names what it holds in float16 ("half": e.g. ["k", "v", "4 * v"])')
    for expr in half:
        try:
            product_terms(expr)
        except ValueError as exc:
            raise ValueError(f"{at}.half: {exc}") from None
    matrix = _field(spec, "matrix", dict, at, None)
    if matrix is not None:
        matrix = (_field(matrix, "component", str, f"{at}.matrix"), _field(matrix, "result", str, f"{at}.matrix"))
    return Kernel(
        id=kid,
        interface=iface,
        abi=abis[iface],
        summary=_field(spec, "summary", str, at),
        rank=_field(spec, "rank", int, at),
        overrides=_knobs(spec, "overrides", at),
        requires=tuple(_field(spec, "requires", list, at, [])),
        limits=dict(_field(spec, "limits", dict, at, {})),
        precision=precision,
        half=half,
        template=_field(spec, "template", str, at, ""),
        defines=_knobs(spec, "defines", at),
        tiles=tuple(_knobs({"tile": t}, "tile", f"{at}.tiles[{i}]") for i, t in enumerate(_field(spec, "tiles", list, at, []))),
        constraints=tuple(_field(spec, "constraints", list, at, [])),
        trusted=_field(spec, "trusted", bool, at, False),
        grids={name: dict(g) for name, g in _field(spec, "grid", dict, at, {}).items()},
        matrix=matrix,
        folder=folder,
    )


def _parse(raw: Any, source: str, folder: Path) -> Registry:
    if not isinstance(raw, dict):
        raise ValueError(f"{source}: must be an object with interfaces and kernels")
    abis = {
        name: _abi(name, spec, f"{source}: interfaces.{name}", folder)
        for name, spec in _field(raw, "interfaces", dict, source).items()
    }
    kernels = {
        kid: _kernel(kid, spec, abis, f"{source}: kernels.{kid}", folder)
        for kid, spec in _field(raw, "kernels", dict, source).items()
    }
    # A total order per op: the native API must never pick between two kernels by accident.
    first: Dict[Tuple[str, int], str] = {}
    for k in kernels.values():
        other = first.setdefault((k.abi.reference, k.rank), k.id)
        if other != k.id:
            raise ValueError(
                f"{source}: kernels.{k.id}: rank {k.rank} is also kernels.{other}'s; ranks must be unique among "
                f"the kernels of op {k.abi.reference!r} (they order the native API's choice)"
            )
    return Registry(abis=abis, kernels=kernels)
