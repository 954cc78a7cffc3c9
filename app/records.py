"""GET /api/records: the committed benchmark history (bench/history/, JSON Lines), read by the
same checker as a file dropped on the page (wgattn.page.bench_import), so that the page charts what
the project measured before its Python is loaded. The files are the one source: nothing is copied
or generated from them; a file changed on disk is read again."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Dict, List, Tuple

from fastapi import APIRouter, HTTPException

from wgattn.page import bench_import

from .errors import RESPONSES
from .paths import HISTORY, ROOT

router = APIRouter(prefix="/api", tags=["api"], responses=RESPONSES)


_lock = threading.Lock()
_cache: Dict[Path, Tuple[Tuple[int, int], bench_import.RecordSource]] = {}


# The history's folders of records the page charts: the suite's runs and decode's bandwidth. The
# GEMM's and prefill's (gemm/, prefill/) are case records that docs/performance.md's tables read.
CHARTED = ("", "decode")


def history_files() -> List[Path]:
    """The history's record files the page charts: bench/history/*.jsonl and decode/*.jsonl."""
    return sorted(p for d in CHARTED for p in (HISTORY / d).glob("*.jsonl"))


def read_source(path: Path) -> bench_import.RecordSource:
    """One history file, read once per change of its size or modification time."""
    st = path.stat()
    key = (st.st_mtime_ns, st.st_size)
    with _lock:
        hit = _cache.get(path)
        if hit is not None and hit[0] == key:
            return hit[1]
    got = bench_import.source(path.relative_to(ROOT).as_posix(), path.read_text())
    with _lock:
        _cache[path] = (key, got)
    return got


@router.get("/records", response_model=None)
def records() -> Dict[str, List[bench_import.RecordSource]]:
    """Every committed benchmark record (bench/history/: `wgattn bench --json`'s records and the
    decode records of bench/decode_bandwidth.py), file by file, checked as a file dropped on the
    page is (wgattn.page.bench_import.read): {"sources": [{path, name, date, records: {bench,
    bandwidth}}]}. A file that does not read is a 500 naming it: the history is the project's
    own and must stay readable."""
    try:
        return {"sources": [read_source(p) for p in history_files()]}
    except ValueError as exc:
        raise HTTPException(status_code=500, detail=str(exc)) from None
