"""Module boundaries (issue 14): no import cycle among wgattn's modules, deferred (function-level)
imports included (cases.py <-> interfaces/sdpa_arena.py lived on one), and each fact defined once
(LAYOUTS was in cases.py and sdpa_arena.py)."""

import ast
from pathlib import Path

import wgattn

PKG = Path(wgattn.__file__).parent


def _modules():
    mods = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def _graph():
    """{module: modules it imports anywhere in its body}, wgattn's own only."""
    mods = _modules()
    graph = {}
    for name, p in mods.items():
        pkg = name if p.name == "__init__.py" else name.rsplit(".", 1)[0]
        deps = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                deps |= {c for c in [mod] + [f"{mod}.{a.name}" for a in node.names] if c in mods}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in mods}
        deps.discard(name)
        # A submodule importing its own package's __init__ (`from . import Case`) is no cycle.
        graph[name] = {d for d in deps if not name.startswith(d + ".")}
    return graph


def _cycle(graph):
    """One import cycle as a list of modules, or None (depth-first search)."""
    state = {}

    def visit(v, path):
        state[v] = "open"
        for w in sorted(graph[v]):
            if state.get(w) == "open":
                return path[path.index(w) :] + [w]
            if w not in state:
                found = visit(w, path + [w])
                if found:
                    return found
        state[v] = "done"
        return None

    for v in sorted(graph):
        if v not in state:
            found = visit(v, [v])
            if found:
                return found
    return None


def test_graph_sees_deferred_imports():
    # The checker itself must see a function-level import, or it could not catch the old cycle.
    assert "wgattn.interfaces" in _graph()["wgattn.conformance"]  # `from .interfaces import module` in run_case
    assert _cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]


def test_no_import_cycle():
    assert _cycle(_graph()) is None


def test_layouts_defined_once():
    from wgattn import reference
    from wgattn.interfaces import sdpa_arena

    assert sdpa_arena.LAYOUTS is reference.LAYOUTS
    literal = [p.name for p in PKG.rglob("*.py") if '("bhsd", "bshd")' in p.read_text()]
    assert literal == ["reference.py"], literal
