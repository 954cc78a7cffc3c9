"""The page's declaration of what it calls on wgattn.page's session (static/types.d.ts, which
TypeScript checks every call against) and the session itself (wgattn.page.PageSession) must agree:
a method renamed or given another parameter list on one side only would pass tsc and fail in the
browser."""

import inspect
import re
from pathlib import Path

from wgattn.page import PageSession

ROOT = Path(__file__).resolve().parents[1]


def _declared(text: str):
    """{method: [parameter names]} of the WgattnPage interface in a .d.ts text."""
    body = re.search(r"interface WgattnPage \{(.*?)\n\}", text, re.S)
    assert body, "static/types.d.ts declares no WgattnPage interface"
    methods = {}
    for name, params in re.findall(r"^\s*(\w+)\((.*?)\)\s*:", body.group(1), re.M):
        methods[name] = [p.split(":")[0].strip().rstrip("?") for p in params.split(",") if p.strip()]
    return methods


def _mismatches(declared):
    out = []
    for name, params in declared.items():
        method = getattr(PageSession, name, None)
        if method is None or name.startswith("_"):
            out.append(f"{name}: PageSession has no such method")
            continue
        have = [p for p in inspect.signature(method).parameters if p != "self"]
        if len(params) != len(have):
            out.append(f"{name}: declared ({', '.join(params)}), PageSession takes ({', '.join(have)})")
    return out


def test_declared_page_methods_match_the_session():
    declared = _declared((ROOT / "static" / "types.d.ts").read_text())
    assert len(declared) >= 18
    assert _mismatches(declared) == []


def test_a_drifted_declaration_is_caught():
    text = (ROOT / "static" / "types.d.ts").read_text()
    renamed = text.replace("grid_judge(", "grid_verdict(")
    assert _mismatches(_declared(renamed)) == ["grid_verdict: PageSession has no such method"]
    fewer = text.replace("probe_judge(run: number, adapter_json: string)", "probe_judge(run: number)")
    assert _mismatches(_declared(fewer)) == ["probe_judge: declared (run), PageSession takes (run, adapter_json)"]
