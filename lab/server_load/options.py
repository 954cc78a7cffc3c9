"""What the server-load scripts share: --root (serve another checkout, to measure main beside a
change) and --log-dir (keep the server's log), the folder that log goes to, and QUIET, the
server's environment for a measurement: its start-up compiles off (they would take a core for
minutes and grow its memory while they run; compile_stall.py measures them on their own)."""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path
from typing import Iterator, Optional

QUIET = {"WGATTN_WARMUP": "0"}


def server_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--root", type=Path, help="serve another checkout (e.g. main, to compare)")
    ap.add_argument("--log-dir", type=Path, help="keep the server's log here (default: a temporary folder)")


@contextlib.contextmanager
def log_folder(path: Optional[Path]) -> Iterator[Path]:
    """`path` (created), or a temporary folder removed afterwards."""
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)
