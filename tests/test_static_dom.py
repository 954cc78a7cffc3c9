"""The page's modules (static/*.js) build the DOM from text, never from HTML: a kernel name, a
compiler message or an imported record (all of which a user or an adapter may choose) is always
text. (Every module is type-checked: tsconfig.json's checkJs covers static/**/*.js.)"""

from __future__ import annotations

import re
from pathlib import Path

STATIC = Path(__file__).resolve().parent.parent / "static"
MODULES = sorted(STATIC.glob("*.js"))

# Parsing HTML from strings: what the page must not do (the DOM's el()/textContent instead).
HTML_SINKS = re.compile(
    r"\.\s*(innerHTML|outerHTML)\b|\binsertAdjacentHTML\b|\bdocument\.write(ln)?\b|\bcreateContextualFragment\b"
)


def _sinks(text: str) -> list:
    return [f"line {n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if HTML_SINKS.search(line)]


def test_no_html_parsed_from_strings():
    found = {p.name: _sinks(p.read_text()) for p in MODULES}
    assert {k: v for k, v in found.items() if v} == {}


def test_the_check_sees_html_sinks():
    assert _sinks('box.innerHTML = `<b>${name}</b>`;\nrow.insertAdjacentHTML("beforeend", x);') != []
    assert len(_sinks('el.outerHTML = "";\n// the page sets no innerHTML\n')) == 1
