"""What the page's JavaScript calls under Pyodide (Python 3.8, numpy 1.17): one PageSession,
created by static/python.js, whose methods the page calls as `page.<name>(...)`.

The page's JS only moves bytes: it asks `prepare` for the dispatch plan of any registered kernel on
a live configuration (wgattn.live), runs it in WebGPU, hands the read-back buffers to
`add_buffer`, fetches the server's native run, and asks `finish` to compare every pair of runtimes
on every output against the float64 reference computed here (page.compare) and judge the run
(page.verdict; `live_summary` judges a run of every kernel); `heatmap` and
`error_map` draw a finished run (wgattn.pictures). The conformance grid (`grid_*`, page.grid), the
precision probe (`probe_*`) and the benchmark (`bench_*`, page.bench_jobs; `bench_import`,
page.bench_import, for a dropped `wgattn bench --json` file) work the same way. What a session
holds between calls is in page.tables; page.session says when each thing is freed.
"""

from __future__ import annotations

from .session import PageSession

__all__ = ["PageSession"]
