"""Module boundaries: no import cycle among wgattn's modules, deferred (function-level)
imports included (cases.py <-> interfaces/sdpa_arena.py lived on one); no deferred import of a
sibling module without a reason; LAYOUTS defined once (it was in cases.py and sdpa_arena.py); and
nothing outside wgattn.interfaces names an interface or takes a private helper of the reference or
the interfaces (bench.py, live.py and pictures.py branched on 26 names, localise.py took one);
and nothing of the product, its tests or bench/ imports the lab."""

import ast
from pathlib import Path

import wgattn

PKG = Path(wgattn.__file__).parent


def _modules(root=PKG):
    mods = {}
    for p in root.rglob("*.py"):
        parts = list(p.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def _imported(node, name, path, mods):
    """The wgattn modules an import statement in module `name` (file `path`) names."""
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
            mod = ".".join(base + ([node.module] if node.module else []))
        else:
            mod = node.module or ""
        return {c for c in [mod] + [f"{mod}.{a.name}" for a in node.names] if c in mods}
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in mods}
    return set()


def _graph(root=PKG):
    """{module: modules it imports anywhere in its body}, the package's own only."""
    mods = _modules(root)
    graph = {}
    for name, p in mods.items():
        deps = set()
        for node in ast.walk(ast.parse(p.read_text())):
            deps |= _imported(node, name, p, mods)
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


def _deferred(root=PKG):
    """{(module, sibling it imports inside a function)}, the package's own modules only."""
    mods = _modules(root)
    found = set()
    for name, p in mods.items():
        for fn in ast.walk(ast.parse(p.read_text())):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    # `from . import x` names the package too: only x counts, as in _graph.
                    found |= {(name, d) for d in _imported(node, name, p, mods) if d != name and not name.startswith(d + ".")}
    return found


# wgattn.native imports wgpu-py, which the page's Pyodide lacks: a module the page also loads
# imports it only when a native run is asked for. That is the one reason a deferred import of a
# sibling needs (no cycle forces one: test_no_import_cycle counts deferred edges too).
NEEDS_WGPU = "wgattn.native"


def test_deferred_imports_need_a_reason():
    deferred = {pair for pair in _deferred() if pair[1] != NEEDS_WGPU}
    assert deferred == set(), "deferred imports of sibling modules without a reason: hoist them"


def test_graph_sees_deferred_imports(tmp_path):
    # The checker itself must see a function-level import, or it could not catch the old cycle
    # (cases.py imported sdpa_arena at the top, sdpa_arena imported cases inside a function).
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "cases.py").write_text("from .iface import run\n")
    (pkg / "iface.py").write_text("def run():\n    from . import cases\n    return cases\n")
    assert _graph(pkg) == {"pkg": set(), "pkg.cases": {"pkg.iface"}, "pkg.iface": {"pkg.cases"}}
    assert _cycle(_graph(pkg)) == ["pkg.cases", "pkg.iface", "pkg.cases"]
    assert _deferred(pkg) == {("pkg.iface", "pkg.cases")}
    assert not any(mod == "wgattn.native" and dep != NEEDS_WGPU for mod, dep in _deferred())  # hoisted


def test_no_import_cycle():
    assert _cycle(_graph()) is None


def test_layouts_defined_once():
    from wgattn import reference
    from wgattn.interfaces import sdpa_arena

    assert sdpa_arena.LAYOUTS is reference.LAYOUTS


def _interface_knowledge(path: Path, interfaces) -> list:
    """What module `path` knows of particular interfaces: an import of one's module
    (wgattn.interfaces.<name>), a private name of wgattn.reference or wgattn.interfaces taken,
    an interface's name as a string (a branch on it, a lookup of it)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.ImportFrom):
            mod = (node.module or "").split(".")
            named = [mod + [a.name] for a in node.names]  # each name as a dotted path
            if not ({"reference", "interfaces"} & set(mod)):
                continue
            for parts in named:
                after = parts[parts.index("interfaces") + 1 :] if "interfaces" in parts else []
                if after[:1] and after[0] in interfaces:
                    found.append(f"{path.name}:{line} imports an interface's module ({'.'.join(parts)})")
                elif any(x.startswith("_") and not x.startswith("__") for x in parts):
                    found.append(f"{path.name}:{line} imports a private {'.'.join(parts)}")
        elif isinstance(node, ast.Import):
            found += [f"{path.name}:{line} imports {a.name}" for a in node.names if a.name.split(".")[-1] in interfaces]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            if isinstance(node.value, ast.Name) and node.value.id in ("reference", "interfaces"):
                found.append(f"{path.name}:{line} reads {node.value.id}.{node.attr}")
        elif isinstance(node, ast.Constant) and node.value in interfaces:
            found.append(f"{path.name}:{line} names {node.value!r}")
    return found


def _outside_the_interfaces():
    app = PKG.parent.parent / "app"
    return [p for p in PKG.rglob("*.py") if p.relative_to(PKG).parts[0] != "interfaces"] + sorted(app.glob("*.py"))


def test_nothing_outside_the_interfaces_knows_one():
    """Everything about an interface is its object's (wgattn.interfaces): the rest of the package
    and the app reach it through the registry, never by its name or by a private helper."""
    from wgattn import interfaces

    names = {i.name for i in interfaces.every()}
    found = [f for p in _outside_the_interfaces() for f in _interface_knowledge(p, names)]
    assert found == []


def test_the_boundary_check_sees_each_kind(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from wgattn.interfaces import flash_fwd\n"
        "from .interfaces.varlen_fwd import INTERFACE\n"
        "from .reference import _check_varlen\n"
        "from .interfaces._varlen import qkv\n"
        "x = reference._softmax\n"
        "if kernel.interface == 'attn_probs':\n    pass\n"
        "case = interfaces.get('flash_fwd').grid_case\n"
    )
    found = _interface_knowledge(planted, {"flash_fwd", "varlen_fwd", "attn_probs"})
    assert len(found) == 7, found


def _imports_lab(path: Path) -> list:
    """The lines of `path` that import the lab (lab/: experiments, never the product's)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
        names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
        found += [f"{path}:{node.lineno} imports {n}" for n in names if n.split(".")[0] == "lab"]
    return found


def test_nothing_of_the_product_or_its_tests_imports_the_lab(tmp_path):
    root = PKG.parent.parent
    files = [p for folder in ("py", "app", "tests", "e2e", "bench") for p in (root / folder).rglob("*.py")]
    assert [f for p in files for f in _imports_lab(p)] == []
    planted = tmp_path / "planted.py"
    planted.write_text("import lab.read_ceiling.read_ceiling\nfrom lab.server_load import soak\nfrom bench import suite\n")
    assert len(_imports_lab(planted)) == 2
