"""The page's modules (static/*.js) build the DOM from text, never from HTML, and write each helper
once (issue 14): a kernel name, a compiler message or an imported record is always text, and a
fix to a helper cannot miss a copy of it. Every module opts in to the type checker
(tests/test_js_typecheck.py)."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

STATIC = Path(__file__).resolve().parent.parent / "static"
MODULES = sorted(STATIC.glob("*.js"))

# Parsing HTML from strings: what the page must not do (the DOM's el()/textContent instead).
HTML_SINKS = re.compile(
    r"\.\s*(innerHTML|outerHTML)\b|\binsertAdjacentHTML\b|\bdocument\.write(ln)?\b|\bcreateContextualFragment\b"
)
# A top-level `function name(` or `const name = (args) =>` (optionally exported, async).
DEFINITION = re.compile(
    r"(?:export\s+)?(?:async\s+)?(?:function\s*\*?\s*([\w$]+)|const\s+([\w$]+)\s*=\s*(?:async\s+)?\(?[\w$,\s{}=]*\)?\s*=>)"
)


def _sinks(text: str) -> list:
    return [f"line {n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if HTML_SINKS.search(line)]


def _top_level(text: str) -> dict:
    """{normalised body: name} of each top-level function or arrow-function constant."""
    out = {}
    blocks = re.split(r"\n(?=\S)", text)  # a block starts at column 0
    for block in blocks:
        m = DEFINITION.match(block)
        if not m:
            continue
        name = m.group(1) or m.group(2)
        code = "\n".join(line.split("//")[0] for line in block.splitlines())
        body = re.sub(r"\s+", " ", code[m.end() :] if m.group(2) else code[code.index("(", m.start(1)) :]).strip()
        out[body] = name
    return out


def _duplicates(modules: dict) -> list:
    """Helpers written twice: the same body (whatever its name) in two places."""
    seen = defaultdict(list)
    for module, text in modules.items():
        for body, name in _top_level(text).items():
            seen[body].append(f"{module}:{name}")
    return [where for where in seen.values() if len(where) > 1]


def test_no_html_parsed_from_strings():
    found = {p.name: _sinks(p.read_text()) for p in MODULES}
    assert {k: v for k, v in found.items() if v} == {}


def test_the_check_sees_html_sinks():
    assert _sinks('box.innerHTML = `<b>${name}</b>`;\nrow.insertAdjacentHTML("beforeend", x);') != []
    assert len(_sinks('el.outerHTML = "";\n// the page sets no innerHTML\n')) == 1


def _shadowed(modules: dict) -> list:
    """Helpers dom.js exports that another module defines again (perhaps written differently)."""
    shared = set(_top_level(modules["dom.js"]).values())
    return [f"{m}:{name}" for m, text in modules.items() if m != "dom.js" for name in _top_level(text).values() if name in shared]


def test_no_helper_written_twice():
    modules = {p.name: p.read_text() for p in MODULES}
    assert _duplicates(modules) == []
    assert _shadowed(modules) == []


def test_the_check_sees_a_copied_helper():
    a = "const $ = (id) => document.getElementById(id);\nfunction fmt(x) {\n  return String(x);\n}\n"
    b = "import x from './y.js';\n\nconst $ = (id) =>   document.getElementById(id);  // again\n"
    b += "function show(x) {\n  return String(x);\n}\n"
    assert sorted(map(sorted, _duplicates({"a.js": a, "b.js": b}))) == [["a.js:$", "b.js:$"], ["a.js:fmt", "b.js:show"]]
    assert _duplicates({"a.js": a}) == []
    assert _shadowed({"dom.js": a, "b.js": "const fmt = (y) => y.toFixed(2);\n"}) == ["b.js:fmt"]


def test_every_module_is_type_checked():
    assert [p.name for p in MODULES if not p.read_text().startswith("// @ts-check\n")] == []
