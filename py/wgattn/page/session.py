"""PageSession: the one object the page's JavaScript calls (static/python.js creates it), owning
every table of the page's work in progress and freeing what it creates.

Every id it hands out (a run, a grid job, a benchmark) comes from one counter. A run is freed
when it is finished or judged (finish, grid_judge, probe_judge, bench_release) or released; a
grid job when its last case is judged, a benchmark when its last job is recorded or skipped, and
either when a new one starts or when it is released (the page's cancel and error paths). Only the
last KEEP_FINISHED finished live runs stay, for their pictures. `held()` counts what is held, so
tests can pin all this.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Type, TypeVar

from .. import bandwidth, bench, live, precision, registry, wire
from ..plan import Plan
from ..precision import ProbeReport
from ..target import Target
from . import bench_import, bench_jobs, compare, grid, verdict
from .replies import BenchPlanned, BenchSkipped, GridItem, GridStart, LivePrepared, Prepared
from .tables import RUN_KINDS, BenchJob, BenchRun, Finished, GridJob, GridRun, LiveRun, ProbeRun, Run

R = TypeVar("R", LiveRun, GridRun, ProbeRun, BenchRun)


class PageSession:
    """What the page's JS calls under Pyodide (Python 3.8, numpy 1.17); every method takes and
    returns JSON text (or bytes for plan_bytes), and says what is wrong with a ValueError."""

    # every kernel of the registry and a few more: a 'run every kernel' keeps all its pictures
    KEEP_FINISHED = len(registry.load().kernels) + 4

    def __init__(self) -> None:
        self._last_id = 0
        self._runs: Dict[int, Run] = {}  # prepared, not yet finished, judged or released
        self._finished: Dict[int, Finished] = {}  # in finishing order: the oldest is dropped first
        self._grids: Dict[int, GridJob] = {}
        self._benches: Dict[int, BenchJob] = {}
        self.probe_report: Optional[ProbeReport] = None  # the browser's last probe: grid_judge's suspects
        self.target = Target(name="this browser (no WebGPU device)")  # the browser's device, once use_target says

    # --- What is held, and freeing it ------------------------------------------------------

    def held(self) -> Dict[str, int]:
        """How many of each thing the session holds: open runs by kind, grid jobs, benchmarks,
        finished runs kept for their pictures."""
        counts = {kind: 0 for kind in RUN_KINDS}
        for state in self._runs.values():
            counts[state.kind] += 1
        counts.update(grid_jobs=len(self._grids), bench_jobs=len(self._benches), finished=len(self._finished))
        return counts

    def stats(self) -> str:
        """`held()` as JSON (for the page and its tests)."""
        return json.dumps(self.held())

    def release(self, id_: int) -> bool:
        """Free whatever `id_` names (a run, a finished run, a grid job and its runs, a benchmark
        and its runs): the page's error paths call it when a run or job will not be completed.
        Freeing what is already gone is no error (False): it may have completed meanwhile."""
        tables = (self._runs, self._finished, self._grids, self._benches)
        found = [t.pop(id_, None) is not None for t in tables]
        for run, state in list(self._runs.items()):
            if (isinstance(state, GridRun) and state.job == id_) or (isinstance(state, BenchRun) and state.bench == id_):
                del self._runs[run]
        return any(found)

    def _new_id(self) -> int:
        self._last_id += 1
        return self._last_id

    def _open(self, run: int) -> Run:
        if run not in self._runs:
            raise ValueError(f"run {run!r} is not open: it was finished, judged or released already, or never prepared")
        return self._runs[run]

    def _take(self, run: int, kind: Type[R]) -> R:
        """Remove open run `run` of `kind` and return it (freed even when judging it then fails)."""
        state = self._open(run)
        if not isinstance(state, kind):
            raise ValueError(f"run {run!r} is a {state.kind} run, not a {kind.kind} run")
        del self._runs[run]
        return state

    # --- Any plan the browser runs: its bytes out, its read-back in --------------------------

    def plan(self, run: int) -> Plan:
        """The plan of an open run (what the browser executes; a native stand-in runs it)."""
        return self._open(run).plan

    def plan_bytes(self, run: int, buffer: str) -> bytes:
        """The initial bytes of one buffer of a prepared plan (becomes a Uint8Array in JS)."""
        for b in self.plan(run).buffers:
            if b.name == buffer:
                return b.data or b""
        raise ValueError(f"run {run} has no buffer {buffer!r}")

    def add_buffer(self, run: int, name: str, data: Any) -> None:
        """Store the browser's read-back bytes of one buffer (a JS Uint8Array or bytes)."""
        state = self._open(run)
        state.raw[name] = bytes(data.to_py()) if hasattr(data, "to_py") else bytes(data)

    # --- Live runs: one kernel on one configuration, three runtimes compared ----------------

    def live_schema(self) -> str:
        """JSON {interface: [{name, type, default, choices?}]}: the live form's fields per interface."""
        return json.dumps(live.schema())

    def use_target(self, target_json: str) -> None:
        """Build this session's later plans for the browser's device: `target_json` is what
        static/webgpu.js reports of it ({name, features, limits (kebab-case), software,
        subgroup_matrix_configs}: wgattn.target.Target.from_json). Tile shapes are chosen to fit
        it, and each plan says whether, and why not, the device can run it."""
        self.target = Target.from_json(json.loads(target_json))

    def availability(self) -> str:
        """JSON {kernel id: why the browser's device cannot run it, "" when it can} (wgattn.target:
        the one answer, which the page only shows)."""
        return json.dumps({k.id: self.target.lacks(k) for k in registry.load().kernels.values()})

    def prepare(self, request_json: str) -> str:
        """{"kernel", "config"} -> JSON {"run", "plan", "digest", "config", "kernel", "interface",
        "requires", "precision", "heads"}; ValueError on bad input. The plan's buffer bytes are
        fetched separately with `plan_bytes` (JSON carries no bytes)."""
        request = json.loads(request_json)
        if not isinstance(request, dict):
            raise ValueError("the request must be an object {kernel, config}")
        run_ = live.build(request.get("kernel", "sdpa_arena.seed"), request.get("config"))
        plan = run_.plan(self.target)
        run = self._new_id()
        self._runs[run] = LiveRun(run_, plan)
        k = run_.kernel
        reply: LivePrepared = {
            "run": run,
            "plan": plan.to_js(),
            "digest": run_.digest,
            "config": run_.config.to_dict(),
            "kernel": k.id,
            "interface": k.interface,
            "requires": list(k.requires),
            "precision": k.precision,
            "heads": run_.config.heads,
        }
        return json.dumps(reply)

    def finish(self, run: int, browser_json: str, native_json: Optional[str]) -> str:
        """Compare every pair of runtimes on every output (wgattn.page.compare) and judge the run
        (wgattn.page.verdict): JSON LiveResult {kernel, config, pairs, runtimes, verdict, ...}.
        The run is kept, for its pictures, among the last
        KEEP_FINISHED finished ones."""
        result, done = compare.compare(run, self._take(run, LiveRun), browser_json, native_json)
        self._finished[run] = done
        while len(self._finished) > self.KEEP_FINISHED:
            del self._finished[next(iter(self._finished))]
        return json.dumps(wire.jsonable(result))

    def live_summary(self, runs_json: str) -> str:
        """The verdict of a run of every kernel from each finished run's {"kernel", "verdict"}:
        JSON LiveSummary (wgattn.page.verdict.summarise)."""
        runs = json.loads(runs_json)
        if not isinstance(runs, list):
            raise ValueError("live_summary takes a list of {kernel, verdict}")
        return json.dumps(verdict.summarise(runs))

    def _done(self, run: int) -> Finished:
        if run not in self._finished:
            raise ValueError(f"run {run!r} is not among the last {self.KEEP_FINISHED} finished runs; run it again")
        return self._finished[run]

    def heatmap(self, run: int, head: int = 0) -> str:
        """JSON picture of query head `head`'s attention probabilities of a finished run."""
        return json.dumps(wire.jsonable(compare.heatmap(self._done(run), head)))

    def error_map(self, run: int, output: str, a: str, b: str, head: int = 0) -> str:
        """JSON picture of |a - b| for one output and query head of a finished run."""
        return json.dumps(wire.jsonable(compare.error_map(self._done(run), output, a, b, head)))

    # --- Conformance grid: `wgattn check`'s grid, run by the browser's WebGPU --------------

    def grid_start(self, request_json: str) -> str:
        """{"interface", "source"?} -> JSON {"job", "items": [{"kernel", "case"}],
        "skipped": [{"kernel", "reason"}]} (wgattn.page.grid). One grid at a time: the previous
        job, and its runs, are freed."""
        job, skipped = grid.start(request_json, self.target)
        for old in list(self._grids):
            self.release(old)
        job_id = self._new_id()
        if job.left:  # a grid with nothing to run is finished already
            self._grids[job_id] = job
        items: List[GridItem] = [{"kernel": k.id, "case": c.name} for k, c in job.items]
        reply: GridStart = {"job": job_id, "items": items, "skipped": skipped}
        return json.dumps(reply)

    def grid_prepare(self, job: int, index: int) -> str:
        """Plan item `index` of a job: JSON {"run", "plan"} (bytes via plan_bytes)."""
        if job not in self._grids:
            raise ValueError(f"grid job {job!r} is not open: every case was judged, or it was released or replaced by a new grid")
        state = grid.item_run(job, self._grids[job], index, self.target)
        run = self._new_id()
        self._runs[run] = state
        reply: Prepared = {"run": run, "plan": state.plan.to_js()}
        return json.dumps(reply)

    def grid_judge(self, run: int, error: str = "") -> str:
        """Judge a run the browser finished (or report its `error`): JSON rows per output. The
        job is freed once every item is judged."""
        state = self._take(run, GridRun)
        try:
            rows = grid.verdict(state, error, self.probe_report)
        finally:
            job = self._grids.get(state.job)
            if job is not None:
                job.left.discard(state.index)
                if not job.left:
                    del self._grids[state.job]
        return json.dumps(wire.jsonable(rows))

    # --- Precision probe: the browser's built-ins measured (wgattn.precision) -------------

    def probe_prepare(self) -> str:
        """JSON {"run", "plan"} of the precision probe (bytes via plan_bytes)."""
        plan = precision.plan()
        run = self._new_id()
        self._runs[run] = ProbeRun(plan)
        reply: Prepared = {"run": run, "plan": plan.to_js()}
        return json.dumps(reply)

    def probe_judge(self, run: int, adapter_json: str = "{}") -> str:
        """The probe's report from the browser's read-back: JSON {adapter, functions}; kept for
        grid_judge's suspects."""
        state = self._take(run, ProbeRun)
        got = state.plan.unpack(state.raw)["got"]
        samples = state.plan.meta["samples"]
        assert isinstance(samples, int)
        report: ProbeReport = {"adapter": json.loads(adapter_json or "{}"), "functions": precision.judge(got, samples)}
        self.probe_report = report
        return json.dumps(wire.jsonable(report))

    # --- Benchmark: `wgattn bench`'s jobs timed by the browser's WebGPU ---------------------

    def bench_start(self, request_json: str) -> str:
        """The request checked and its jobs listed (wgattn.page.bench_jobs.start; a dense op's, or
        one timed as bandwidth, decode): JSON {"bench", "op", "baseline", "impls", "seq_lens",
        "protocol", "repeat", "jobs", "series", "stamps_kept", "skipped", "limits"} (BenchStart).
        One benchmark at a time: the previous one, and its plans, are freed."""
        bench_id = self._new_id()
        job, reply = bench_jobs.start(request_json, self.target, bench_id)
        for old in list(self._benches):
            self.release(old)
        if job.left:  # a benchmark with every impl skipped is finished already
            self._benches[bench_id] = job
        return json.dumps(wire.jsonable(reply))

    def bench_schema(self, op: str) -> str:
        """JSON {"interface", "fields"} of an op timed as bandwidth (decode): the interface that
        serves it and its configuration's fields (the form the page shows for it, labelled)."""
        if op not in bench.BANDWIDTH_OPS:
            raise ValueError(f"op must be one of {list(bench.BANDWIDTH_OPS)}, got {op!r}")
        (iface,) = bench.serving(op)
        return json.dumps({"interface": iface.name, "fields": iface.Config.schema()})

    def bench_validate(self, request_json: str) -> str:
        """What is wrong with a benchmark request, as bench_start would say it (the field and what
        is allowed), or "" when bench_start takes it: the page checks its forms as they are typed.
        Nothing is started or held."""
        try:
            bench_jobs.start(request_json, self.target, 0)
        except ValueError as exc:
            return str(exc)
        return ""

    def _bench(self, bench_id: int) -> BenchJob:
        if bench_id not in self._benches:
            raise ValueError(f"benchmark {bench_id!r} is not open: it was released or replaced by a newer benchmark")
        return self._benches[bench_id]

    def bench_plan(self, bench_id: int, index: int, plan_index: int = 0) -> str:
        """Plan `plan_index` of job `index`: JSON {"run", "plan", "count"} (bytes via plan_bytes,
        freed by bench_release), or {"skipped": why} when the kernel cannot build this job's plan."""
        job = self._bench(bench_id)
        bench_jobs.item(job, index)  # a bad index is the caller's error, not a skipped job
        try:
            plans = bench_jobs.job_plans(job, index, self.target)
        except ValueError as exc:
            self._settle(bench_id, index)
            skipped: BenchSkipped = {"skipped": str(exc)}
            return json.dumps(skipped)
        if isinstance(plan_index, bool) or not isinstance(plan_index, int) or not 0 <= plan_index < len(plans):
            raise ValueError(f"plan_index must be an integer in 0..{len(plans) - 1}, got {plan_index!r}")
        plan = plans[plan_index]
        run = self._new_id()
        self._runs[run] = BenchRun(bench_id, plan)
        bench_jobs.handed_out(job, index, plan_index)
        planned: BenchPlanned = {"run": run, "plan": plan.to_js(), "count": len(plans)}
        return json.dumps(planned)

    def bench_release(self, run: int) -> None:
        """Forget a timed plan (its bytes are on the GPU already)."""
        self.release(run)

    def bench_schedule(self, bench_id: int, n_entries: int) -> str:
        """JSON: the order of every round of a series of `n_entries` (wgattn.protocol.schedule)."""
        return json.dumps(bench_jobs.schedule(self._bench(bench_id), n_entries))

    def bench_warm(self, bench_id: int, state_json: str) -> str:
        """After a warm-up round: JSON {"done", "warmed"} (wgattn.page.bench_jobs.warm)."""
        return json.dumps(bench_jobs.warm(self._bench(bench_id), state_json))

    def bench_calibrate(self, bench_id: int, state_json: str) -> str:
        """After the warm-up: JSON {"reps", "resolution_ns"} per entry (bench_jobs.calibrate)."""
        return json.dumps(bench_jobs.calibrate(self._bench(bench_id), state_json))

    def bench_record(self, bench_id: int, index: int, payload_json: str) -> str:
        """The record of job `index` from what the page measured: JSON of `wgattn bench
        --json`'s shape (wgattn.page.bench_jobs.record)."""
        rec, last = bench_jobs.record(self._bench(bench_id), index, payload_json)
        if last:
            self._settle(bench_id, index)
        return json.dumps(rec)

    def _settle(self, bench_id: int, index: int) -> None:
        """Job `index` is recorded or skipped: the benchmark is freed once every job is."""
        job = self._benches[bench_id]
        job.left.discard(index)
        if not job.left:
            self.release(bench_id)

    def bench_fills(self, bench_id: int, index: int) -> str:
        """JSON [plan]: the plans that fill job `index`'s inputs on the GPU, each binding the timed
        plan's buffer of its name (the page runs them on those buffers, then the job once, then
        sends its `check` buffer to bench_check, before anything is timed); [] for a job with
        no `check`."""
        return json.dumps([p.to_js() for p in bench_jobs.fills(self._bench(bench_id), index)])

    def bench_check(self, bench_id: int, index: int, data: Any) -> str:
        """Job `index`'s `check` buffer (a JS Uint8Array or bytes) against the float64 reference:
        JSON BenchCheck. Such a job is recorded only once its check passed."""
        raw = bytes(data.to_py()) if hasattr(data, "to_py") else bytes(data)
        return json.dumps(wire.jsonable(bench_jobs.check(self._bench(bench_id), index, raw)))  # a NaN output: "inf"

    def bench_shares(self, records_json: str) -> str:
        """Bandwidth records (a benchmark's, JSON) with each one's share of its series' copy filled
        in (wgattn.bandwidth.copy_shares), as JSON."""
        records = json.loads(records_json)
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise ValueError("bench_shares takes a list of bandwidth records")
        bandwidth.copy_shares(records)
        return json.dumps(records)

    def bench_import(self, text: str) -> str:
        """A dropped file's records (`wgattn bench --json`'s, a bench/history file's, decode
        records), checked, as JSON {"bench": [...], "bandwidth": [...]} (ValueError saying what
        is wrong)."""
        return json.dumps(bench_import.read(text))
