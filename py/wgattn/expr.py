"""Integer expressions of sizes and knobs: the manifest's (grids, override constants, tile
constraints) and the WGSL's own (a workgroup array's length, a @workgroup_size), evaluated the
same way: + - * / // %, ceil_div(a, b), min and max, next_pow2(a) (the least power of two >= a),
parentheses, integer literals (WGSL's `64u` included), names. Division is integer division: every
quantity is a count."""

from __future__ import annotations

import ast
import functools
import re
import threading
from typing import List, Mapping

__all__ = ["evaluate", "product_terms"]

_SUFFIX = re.compile(r"\b(\d+)[ui]\b")
# CPython 3.11 (up to 3.11.8) keeps ast.parse's recursion count in one global: two threads parsing
# at once (a server's compile and planning threads) fail with "SystemError: AST constructor
# recursion depth mismatch". Each expression is parsed once, one at a time.
_PARSING = threading.Lock()


@functools.lru_cache(maxsize=4096)
def _parsed(expr: str) -> ast.Expression:
    try:
        with _PARSING:
            return ast.parse(_SUFFIX.sub(r"\1", expr.strip()), mode="eval")
    except SyntaxError:
        raise ValueError(f"expression {expr!r}: unsupported syntax") from None


def evaluate(expr: str, names: Mapping[str, int]) -> int:
    """The integer value of `expr` given `names`; ValueError naming an unknown name or syntax."""

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise ValueError(f"expression {expr!r} names unknown {node.id!r}")
            return int(names[node.id])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, (ast.FloorDiv, ast.Div)):
                return a // b
            if isinstance(node.op, ast.Mod):
                return a % b
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "next_pow2" and len(node.args) == 1:
            return 1 << max(ev(node.args[0]) - 1, 0).bit_length()
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 2:
            a, b = ev(node.args[0]), ev(node.args[1])
            if node.func.id == "ceil_div":
                return -(-a // b)
            if node.func.id in ("min", "max"):
                return min(a, b) if node.func.id == "min" else max(a, b)
        raise ValueError(f"expression {expr!r}: unsupported syntax")

    return ev(_parsed(expr))


_TERM = re.compile(r"^(?:[a-z_][a-z0-9_]*|\d+(?:\.\d+)?)$")


def product_terms(expr: str) -> List[str]:
    """The terms of a product of names and numbers (a float16 kernel's manifest "half", e.g.
    "4 * v"); ValueError for anything else."""
    terms = [t.strip() for t in expr.split("*")]
    if not all(_TERM.match(t) for t in terms):
        raise ValueError(f"{expr!r}: a product of names and numbers, such as '4 * v'")
    return terms
