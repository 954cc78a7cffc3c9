"""WGSL preprocessing: the one step between a shader file and the text both runtimes compile.

Run by the same Python in CPython (wgpu-py) and under Pyodide (the page builds the plan, so the
browser gets the text this module made): both runtimes compile identical WGSL. Four directives,
each alone on its line; `#` never starts a line of WGSL, so a directive left unexpanded fails to
compile rather than passing silently:

    #include "lib/name.wgsl"   the file's text (relative to the shaders folder), once per shader
    #if NAME                   keep the lines up to #else / #endif when define NAME is non-zero
    #else / #endif
    #const NAME                `const NAME: u32 = <define NAME>u;` (the define must be given): the
                               length of a function-scope array, which WGSL wants as a constant
                               and an `override` cannot give
    #for NAME COUNT / #endfor  the lines between, COUNT times (an expression of the defines:
                               wgattn.expr), `{NAME}` in them replaced by 0, 1, ..., COUNT - 1:
                               straight-line code, with no loop for a driver to unroll or not and
                               no register array indexed by a loop counter (`acc_{i}_{j}`), and
                               workgroup-array indices that are constant expressions, which
                               Dawn's robustness leaves unclamped

Variants (f32/f16, say) are one file with `#if F16` blocks, registered as kernels that name the
same "template" with different "defines". Tile shapes stay WGSL `override` constants.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Set, Tuple

from .expr import evaluate

__all__ = ["preprocess", "reader", "code", "struct_fields", "bindings", "consts", "scope", "workgroup_storage", "workgroup_size"]

_DIRECTIVE = re.compile(r"^\s*#\s*(include|if|else|endif|const|for|endfor)\b\s*(.*?)\s*$")


def preprocess(
    text: str, defines: Mapping[str, int], read: Callable[[str], str], name: str = "<shader>", seen: Optional[Set[str]] = None
) -> str:
    """`text` with directives expanded; `read(path)` returns an included file's text. `seen`
    collects the paths included (each is included once)."""
    seen = set() if seen is None else seen
    out: List[str] = []
    stack: List[List[bool]] = []  # [condition, in_else] per open #if
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        line = lines[number]
        number += 1
        m = _DIRECTIVE.match(line)
        where = f"{name}:{number}"
        if m is None:
            if all(c != e for c, e in stack):
                out.append(line)
            continue
        word, arg = m.groups()
        active = all(c != e for c, e in stack)
        if word == "for":
            body, number = _for_body(lines, number, where)
            if active:
                out += _unrolled(arg, body, defines, read, f"{name}:{number}", seen, where)
        elif word == "endfor":
            raise ValueError(f"{where}: #endfor without #for")
        elif word == "if":
            if not re.fullmatch(r"[A-Za-z_]\w*", arg):
                raise ValueError(f"{where}: #if takes one define name, got {arg!r}")
            stack.append([bool(defines.get(arg, 0)), False])
        elif word == "else":
            if not stack or stack[-1][1]:
                raise ValueError(f"{where}: #else without #if")
            stack[-1][1] = True
        elif word == "endif":
            if not stack:
                raise ValueError(f"{where}: #endif without #if")
            stack.pop()
        elif word == "const":
            if not re.fullmatch(r"[A-Za-z_]\w*", arg):
                raise ValueError(f"{where}: #const takes one define name, got {arg!r}")
            if active:
                if arg not in defines or int(defines[arg]) < 0:
                    raise ValueError(f"{where}: #const {arg} needs a define {arg} >= 0 (the kernel's defines give none)")
                out.append(f"const {arg}: u32 = {int(defines[arg])}u;")
        elif active:  # include
            inc = re.fullmatch(r'"([\w./-]+)"', arg)
            if inc is None or ".." in inc.group(1):
                raise ValueError(f'{where}: #include takes "path" inside the shaders folder, got {arg!r}')
            path = inc.group(1)
            if path not in seen:
                seen.add(path)
                out.append(f"// ---- {path} ----")
                out.append(preprocess(read(path), defines, read, path, seen))
                out.append(f"// ---- end {path} ----")
    if stack:
        raise ValueError(f"{name}: #if without #endif")
    return "\n".join(out) + "\n"


def _for_body(lines: List[str], start: int, where: str) -> Tuple[List[str], int]:
    """The lines of the #for opened just before lines[start], and the index past its #endfor."""
    depth = 1
    for i in range(start, len(lines)):
        m = _DIRECTIVE.match(lines[i])
        if m is not None and m.group(1) in ("for", "endfor"):
            depth += 1 if m.group(1) == "for" else -1
            if depth == 0:
                return lines[start:i], i + 1
    raise ValueError(f"{where}: #for without #endfor")


def _unrolled(
    arg: str, body: List[str], defines: Mapping[str, int], read: Callable[[str], str], name: str, seen: Set[str], where: str
) -> List[str]:
    """`#for NAME COUNT`'s body, COUNT times, `{NAME}` replaced by each count, preprocessed."""
    m = re.fullmatch(r"([A-Za-z_]\w*)\s+(.+)", arg)
    if m is None:
        raise ValueError(f"{where}: #for takes a name and a count, got {arg!r}")
    var, count_expr = m.groups()
    try:
        count = evaluate(count_expr, defines)
    except (ValueError, SyntaxError) as exc:
        raise ValueError(f"{where}: #for {var}: {exc}") from None
    if not 0 <= count <= _MOST_REPEATS:
        raise ValueError(f"{where}: #for {var} repeats {count} times; 0..{_MOST_REPEATS} allowed")
    text = "\n".join(body)
    token = "{" + var + "}"
    return [preprocess(text.replace(token, str(n)), defines, read, name, seen).rstrip("\n") for n in range(count)]


_MOST_REPEATS = 256  # one #for's body at most this many times: straight-line code stays readable by a compiler


def reader(folder: Path) -> Callable[[str], str]:
    """Reads included files from `folder` (the shaders folder)."""
    return lambda path: (folder / path).read_text()


# --- Reading declarations back out of WGSL ----------------------------------------------------
# The registry derives what the WGSL declares rather than restating it: an interface's Params
# fields and bindings (from its header, shaders/interfaces/<name>.wgsl), a kernel's array caps
# (`const MAX_<knob>`), the workgroup storage and invocations of each entry point. These readers
# know WGSL's module scope (declarations, attributes, brace-delimited bodies) and nothing more.

_COMMENT = re.compile(r"//[^\n]*")
_STRUCT = re.compile(r"\bstruct\s+(\w+)\s*\{([^}]*)\}", re.S)
_BINDING = re.compile(r"@group\(\s*0\s*\)\s*@binding\(\s*(\d+)\s*\)\s*var<\s*(\w+)\s*(?:,\s*(\w+)\s*)?>\s*(\w+)\s*:\s*([^;]+);")
_CONST = re.compile(r"^\s*const\s+(\w+)\s*:\s*[ui]32\s*=\s*(\d+)[ui]?\s*;", re.M)
_ALIAS = re.compile(r"\balias\s+(\w+)\s*=\s*([^;]+);")
_WORKGROUP_VAR = re.compile(r"\bvar<workgroup>\s+(\w+)\s*:\s*([^;]+?)\s*;")
# A module-scope integer constant or override with its value: `const KP4: u32 = (SK + 8u) / 4u;`
_SCOPED = re.compile(r"^\s*(?:const|override)\s+(\w+)\s*(?::\s*(\w+)\s*)?=\s*([^;]+);", re.M)
_SCALAR_BYTES = {"f32": 4, "i32": 4, "u32": 4, "f16": 2, "bool": 4}


# The readers below take the WGSL text and nothing else, and a plan asks them about the same text
# many times (a tile search sizes one kernel's workgroup memory for each candidate): the parsing
# is remembered for the last few texts, the evaluation on the knobs is not.
_REMEMBERED = 32


@lru_cache(maxsize=_REMEMBERED)
def code(source: str) -> str:
    """WGSL without its // comments."""
    return _COMMENT.sub("", source)


def struct_fields(source: str, name: str) -> List[Tuple[str, str]]:
    """[(field, type)] of struct `name`, in order; ValueError when the source has none."""
    for m in _STRUCT.finditer(code(source)):
        if m.group(1) == name:
            return re.findall(r"(\w+)\s*:\s*([\w<>, ]+?)\s*(?:,|$)", m.group(2).strip())
    raise ValueError(f"no struct {name} is declared")


def bindings(source: str) -> Dict[int, Tuple[str, str, str, str]]:
    """{binding: (address space, access, variable, type)} of the @group(0) variables; access
    "read" where the declaration leaves it out (a uniform's, a read-only storage's default)."""
    out = {}
    for b, space, access, name, typ in _BINDING.findall(code(source)):
        out[int(b)] = (space, access or "read", name, " ".join(typ.split()))
    return out


def consts(source: str) -> Dict[str, int]:
    """{name: value} of the module's integer constants (`const MAX_BC: u32 = 64u;`)."""
    return {name: int(value) for name, value in _CONST.findall(code(source))}


def functions(source: str) -> Dict[str, str]:
    """{name: body} of every function, bodies delimited by matching braces."""
    text = code(source)
    out = {}
    for m in re.finditer(r"\bfn\s+(\w+)\s*\(", text):
        start = text.find("{", m.end())
        depth, i = 0, start
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        out[m.group(1)] = text[start + 1 : i]
    return out


@lru_cache(maxsize=_REMEMBERED)
def reachable(source: str, entry: str) -> str:
    """The bodies of `entry` and of every function it calls, directly or not, as one text."""
    fns = functions(source)
    seen, todo, text = set(), [entry], []
    while todo:
        name = todo.pop()
        if name in seen or name not in fns:
            continue
        seen.add(name)
        text.append(fns[name])
        todo.extend(re.findall(r"\b(\w+)\s*\(", fns[name]))
    return "\n".join(text)


def _split_top(text: str) -> List[str]:
    """`text` split at the commas outside <> and ()."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def type_bytes(typ: str, aliases: Mapping[str, str], names: Optional[Mapping[str, int]] = None) -> int:
    """Bytes of a scalar, vecN, atomic, alias or (nested) fixed-size array type, array lengths
    evaluated on `names` (what a workgroup variable holds)."""
    typ = " ".join(typ.split())
    typ = aliases.get(typ, typ)
    m = re.fullmatch(r"(vec\d|atomic|array)\s*<(.*)>", typ)
    if m is None:
        if typ not in _SCALAR_BYTES:
            raise ValueError(f"workgroup variables of {typ!r} are not sized here")
        return _SCALAR_BYTES[typ]
    kind, args = m.group(1), _split_top(m.group(2))
    if kind == "atomic":
        return type_bytes(args[0], aliases, names)
    if kind == "array":
        if len(args) != 2:
            raise ValueError(f"a workgroup array needs a length: {typ!r}")
        return type_bytes(args[0], aliases, names) * evaluate(args[1], names or {})
    return int(kind[3:]) * type_bytes(args[0], aliases, names)


@lru_cache(maxsize=_REMEMBERED)
def _module_scope(text: str) -> str:
    """`text` without what lies inside braces (function bodies, struct members)."""
    out, depth = [], 0
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


@lru_cache(maxsize=_REMEMBERED)
def _scoped(source: str) -> Tuple[Tuple[str, str, str], ...]:
    return tuple(_SCOPED.findall(_module_scope(code(source))))


def scope(source: str, names: Mapping[str, int]) -> Dict[str, int]:
    """`names` plus the module's integer constants and the defaults of its overrides that `names`
    does not set, evaluated in order (`const KP4: u32 = (SK + 8u) / 4u;`, `override DK: u32 =
    DP / SK;`); float ones and those naming something unknown are left out."""
    out = dict(names)
    for name, typ, value in _scoped(source):
        if name in out or (typ and typ not in ("u32", "i32")):
            continue
        try:
            out[name] = evaluate(value, out)
        except ValueError:
            pass
    return out


def workgroup_storage(source: str, entry: str, names: Mapping[str, int]) -> int:
    """Bytes of the `var<workgroup>` variables entry point `entry` uses (directly or through the
    functions it calls, as WebGPU counts them), their array lengths evaluated on `names` and the
    module's own constants (`scope`)."""
    aliases, used = _workgroup_vars(source, entry)
    known = scope(source, names)
    return sum(type_bytes(typ, dict(aliases), known) for typ in used)


@lru_cache(maxsize=_REMEMBERED)
def _workgroup_vars(source: str, entry: str) -> Tuple[Tuple[Tuple[str, str], ...], Tuple[str, ...]]:
    """(the module's aliases, the types of the `var<workgroup>` variables `entry` uses)."""
    text = code(source)
    aliases = tuple((name, " ".join(t.split())) for name, t in _ALIAS.findall(text))
    used = reachable(source, entry)
    return aliases, tuple(typ for name, typ in _WORKGROUP_VAR.findall(text) if re.search(r"\b%s\b" % name, used))


def workgroup_size(source: str, entry: str) -> Optional[str]:
    """The @workgroup_size of `entry` as an expression (its dimensions multiplied), or None."""
    m = re.search(r"@workgroup_size\(([^)]*)\)[^{]*?fn\s+%s\s*\(" % re.escape(entry), code(source), re.S)
    if not m:
        return None
    dims = [d.strip() for d in m.group(1).split(",") if d.strip()]
    return " * ".join(f"({d})" for d in dims)


def literal_workgroup_size(source: str, entry: str) -> Optional[int]:
    """The invocation count of `entry` when its @workgroup_size is made of integer literals
    (a user's kernel, say), else None (an override: the registry knows it)."""
    m = re.search(r"@workgroup_size\(([^)]*)\)[^{]*?fn\s+%s\s*\(" % re.escape(entry), code(source), re.S)
    if not m:
        return None
    dims = [d.strip().rstrip("u") for d in m.group(1).split(",") if d.strip()]
    if not all(d.isdigit() for d in dims):
        return None
    count = 1
    for d in dims:
        count *= int(d)
    return count


def overrides(source: str, defaulted: bool = True) -> Set[str]:
    """The names of the module's `override` constants; defaulted=False: only those without an
    initializer (`override WG: u32;`), which a pipeline must be given a value for."""
    found = re.findall(r"^\s*override\s+(\w+)\s*(?::\s*\w+\s*)?(=)?", code(source), re.M)
    return {name for name, init in found if defaulted or not init}
