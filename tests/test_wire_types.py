"""The JSON shapes between the page and Python are declared once, in Python (TypedDicts and
dataclasses next to the code that makes them, and PageSession's signatures); static/wire.d.ts,
which the page's JSDoc names and tsc checks every use of, is generated from them. A key added,
renamed or retyped on the Python side changes the generated text: this test fails until the file
is regenerated, and tsc then fails on any JavaScript still using the old shape
(tests/test_js_typecheck.py plants such a use)."""

import typing
from pathlib import Path

import pytest

from wgattn import typescript

WIRE = Path(__file__).resolve().parents[1] / "static" / "wire.d.ts"


def test_wire_d_ts_is_generated_from_the_python():
    assert WIRE.read_text() == typescript.typescript(), (
        "static/wire.d.ts is not what the Python declares: run `.venv/bin/python -m wgattn.typescript > static/wire.d.ts`"
    )


def test_every_shape_is_written_with_every_key():
    text = typescript.typescript()
    for name, tp in typescript.WIRE:
        if typing.get_origin(tp) is typing.Union:
            assert f"type {name} = " in text
            continue
        body = text.split(f"interface {name} {{\n", 1)[1].split("\n}", 1)[0]
        keys = [line.strip().split(":")[0].rstrip("?") for line in body.splitlines()]
        assert keys == [k for k, _, _ in typescript._fields(tp)], name


def test_a_key_added_on_the_python_side_changes_the_declaration(monkeypatch):
    from wgattn.page import replies

    before = typescript.typescript()
    monkeypatch.setitem(replies.GridItem.__annotations__, "extra", int)
    after = typescript.typescript()
    assert after != before and "  extra: number;" in after.split("interface GridItem {", 1)[1].split("}", 1)[0]


def test_a_shape_nobody_declared_is_refused():
    class Loose(typing.TypedDict):
        inner: "typing.Dict[str, Loose]"

    with pytest.raises(TypeError, match="declare it in WIRE"):
        typescript._ts(typing.List[Loose], {}, "inner")
