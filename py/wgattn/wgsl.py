"""WGSL preprocessing: the one step between a shader file and the text both runtimes compile.

Run by the same Python in CPython (wgpu-py) and under Pyodide (the page builds the plan, so the
browser gets the text this module made): both runtimes compile identical WGSL. Three directives,
each alone on its line; `#` never starts a line of WGSL, so a directive left unexpanded fails to
compile rather than passing silently:

    #include "lib/name.wgsl"   the file's text (relative to the shaders folder), once per shader
    #if NAME                   keep the lines up to #else / #endif when define NAME is non-zero
    #else / #endif

Variants (f32/f16, say) are one file with `#if F16` blocks, registered as kernels that name the
same "template" with different "defines". Tile shapes stay WGSL `override` constants.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, List, Mapping, Optional, Set

__all__ = ["preprocess", "reader"]

_DIRECTIVE = re.compile(r"^\s*#\s*(include|if|else|endif)\b\s*(.*?)\s*$")


def preprocess(
    text: str, defines: Mapping[str, int], read: Callable[[str], str], name: str = "<shader>", _seen: Optional[Set[str]] = None
) -> str:
    """`text` with directives expanded; `read(path)` returns an included file's text."""
    seen = set() if _seen is None else _seen
    out: List[str] = []
    stack: List[List[bool]] = []  # [condition, in_else] per open #if
    for number, line in enumerate(text.splitlines(), 1):
        m = _DIRECTIVE.match(line)
        where = f"{name}:{number}"
        if m is None:
            if all(c != e for c, e in stack):
                out.append(line)
            continue
        word, arg = m.groups()
        active = all(c != e for c, e in stack)
        if word == "if":
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


def reader(folder: Path) -> Callable[[str], str]:
    """Reads included files from `folder` (the shaders folder)."""
    return lambda path: (folder / path).read_text()
