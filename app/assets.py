"""Static files with a caching policy and gzip'd copies made ahead.

`Assets` is Starlette's StaticFiles plus a Cache-Control header of its mount's choosing (versioned
URLs are immutable for a year; the page's own files are revalidated, ETag making that a 304) and,
for a client that accepts gzip, `<file>.gz` beside a file when set-up made one (scripts/setup.sh
compresses Pyodide's files once): the big files are not compressed again on every load, which
Starlette's GZipMiddleware (the app's, for everything else) would do.
"""

from __future__ import annotations

import mimetypes
import os
import stat

from fastapi.staticfiles import StaticFiles
from starlette.datastructures import Headers
from starlette.responses import FileResponse, Response
from starlette.staticfiles import NotModifiedResponse
from starlette.types import Scope

__all__ = ["IMMUTABLE", "REVALIDATE", "Assets", "gzip_copy", "sent_size"]

IMMUTABLE = "public, max-age=31536000, immutable"  # a URL whose path names its version
REVALIDATE = "no-cache"  # the same URL may change: ask again each time (a 304 when it did not)


def gzip_copy(path: str | os.PathLike) -> str | None:
    """The path of the gzip'd copy set-up made of `path`, if there is one at least as new."""
    gz = f"{os.fspath(path)}.gz"
    try:
        return gz if os.stat(gz).st_mtime >= os.stat(path).st_mtime else None
    except OSError:
        return None


def sent_size(path: str | os.PathLike) -> int:
    """The bytes a client that accepts gzip receives for `path` (its gzip'd copy's, if any)."""
    return os.stat(gzip_copy(path) or path).st_size


class Assets(StaticFiles):
    """StaticFiles whose responses carry `cache_control` and, where set-up made one and the
    client accepts gzip, the gzip'd copy of the file (Content-Encoding: gzip)."""

    def __init__(self, *, directory: str | os.PathLike, cache_control: str) -> None:
        super().__init__(directory=directory)
        self.cache_control = cache_control

    def file_response(self, full_path, stat_result: os.stat_result, scope: Scope, status_code: int = 200) -> Response:
        request = Headers(scope=scope)
        headers = {"Cache-Control": self.cache_control}
        gz = gzip_copy(full_path)
        if gz is not None:
            headers["Vary"] = "Accept-Encoding"
        if gz is not None and "gzip" in request.get("accept-encoding", ""):
            gz_stat = os.stat(gz)
            if stat.S_ISREG(gz_stat.st_mode):
                media_type = mimetypes.guess_type(os.fspath(full_path))[0] or "application/octet-stream"
                response = FileResponse(
                    gz,
                    status_code=status_code,
                    stat_result=gz_stat,
                    media_type=media_type,
                    headers={**headers, "Content-Encoding": "gzip"},
                )
                return self._maybe_not_modified(response, request)
        response = FileResponse(full_path, status_code=status_code, stat_result=stat_result, headers=headers)
        return self._maybe_not_modified(response, request)

    def _maybe_not_modified(self, response: FileResponse, request: Headers) -> Response:
        if self.is_not_modified(response.headers, request):
            return NotModifiedResponse(response.headers)
        return response
