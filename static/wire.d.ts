// The JSON shapes Python sends the page, as global TypeScript interfaces: GENERATED from the
// Python declarations (wgattn.typescript; regenerate with
// `.venv/bin/python -m wgattn.typescript > static/wire.d.ts`), never edited by hand.
// tests/test_wire_types.py fails when this file and the Python shapes differ.

/** A float that JSON cannot hold as a number arrives as a string (wgattn.wire.jsonable). */
type JsonFloat = number | "inf" | "-inf" | "nan";


/** Plan.to_js(): what static/webgpu.js executes. (Python: wgattn.plan.PlanJson) */
interface Plan {
  unavailable: string;
  buffers: PlanBuffer[];
  dispatches: Dispatch[];
}

/** A buffer of a plan, for the page's executor (its bytes come separately). (Python: wgattn.plan.PlanBufferJson) */
interface PlanBuffer {
  name: string;
  size: number;
  usage: "storage" | "uniform";
  has_data: boolean;
  read: boolean;
}

/** A dispatch of a plan, for the page's executor. (Python: wgattn.plan.PlanDispatchJson) */
interface Dispatch {
  label: string;
  source: string;
  entry_point: string;
  constants: Record<string, number>;
  bindings: [number, string][];
  layout: ([number, "uniform" | "storage" | "read-only-storage"])[];
  workgroups: [number, number, number];
  requires: string[];
}

/** What static/webgpu.js reports of the browser's device (Target.from_json reads it). (Python: wgattn.target.TargetJson) */
interface TargetJson {
  name: string;
  words: string[];
  features: string[];
  limits: Record<string, number>;
  software?: boolean;
  subgroup_matrix_configs?: MatrixConfigJson[];
  subgroup_min_size?: number;
  subgroup_max_size?: number;
}

/** GPUAdapterInfo.subgroupMatrixConfigs' entries, as WebGPU spells them. (Python: wgattn.target.MatrixConfigJson) */
interface MatrixConfigJson {
  componentType: string;
  resultComponentType: string;
  M: number;
  N: number;
  K: number;
}

/** GET /api/kernels: every interface and kernel, and each interface's live configuration. (Python: wgattn.live.Catalogue) */
interface Catalogue {
  interfaces: Record<string, InterfaceInfo>;
  kernels: KernelInfo[];
  configs: Record<string, SchemaField[]>;
}

/** InterfaceInfo (Python: wgattn.live.InterfaceInfo) */
interface InterfaceInfo {
  summary: string;
  reference: string;
  conventions: Record<string, string>;
}

/** KernelInfo (Python: wgattn.live.KernelInfo) */
interface KernelInfo {
  id: string;
  interface: string;
  summary: string;
  requires: string[];
  precision: string;
  wgsl: string;
}

/** One field of a live configuration, as the page's form shows it (wgattn.live.schema). (Python: wgattn.interfaces.config.FieldSchema) */
interface SchemaField {
  name: string;
  type: "int" | "float" | "bool" | "str";
  default: unknown;
  label?: string;
  min?: number;
  max?: number;
  choices?: string[];
  sentinels?: Record<string, string>;
  hint?: string;
}

/** A plan the page's Python prepared: `run` numbers it (its bytes: PageSession.plan_bytes). (Python: wgattn.page.replies.Prepared) */
interface Prepared {
  run: number;
  plan: Plan;
}

/** PageSession.prepare: a live run's plan and what the page shows of it. (Python: wgattn.page.replies.LivePrepared) */
interface LivePrepared {
  run: number;
  plan: Plan;
  digest: string;
  config: Record<string, unknown>;
  kernel: string;
  interface: string;
  requires: string[];
  precision: string;
  heads: number;
}

/** Milliseconds: wall (submit to results), gpu (timestamps), reference (the float64 run). (Python: wgattn.page.replies.Timings) */
interface Timings {
  wall_ms?: number;
  gpu_ms?: number;
  reference_ms?: number;
}

/** One runtime of a live run: it ran (ok, timings), was skipped (why), or failed (error). (Python: wgattn.page.replies.RuntimeReport) */
interface RuntimeReport {
  ok: boolean;
  skipped?: string;
  error?: string;
  timings?: Timings;
  adapter?: Record<string, unknown>;
}

/** One runtime pair compared on one output. (Python: wgattn.page.replies.OutputPair) */
interface Pair {
  a: string;
  b: string;
  max_abs_err: JsonFloat;
  allowance: JsonFloat;
  pass: boolean;
  output: string;
}

/** LiveResult (Python: wgattn.page.replies.LiveResult) */
interface LiveResult {
  run: number;
  kernel: string;
  interface: string;
  precision: string;
  config: Record<string, unknown>;
  digest: string;
  outputs: string[];
  heads: number;
  naive_err: Record<string, JsonFloat>;
  naive_f32_err: Record<string, JsonFloat>;
  runtimes: Record<string, RuntimeReport>;
  pairs: Pair[];
  pass: boolean;
  verdict: Verdict;
}

/** A live run's verdict (LiveResult.verdict): its state, the word and sentence the page shows after the kernel's name, amber notes, and the reasons behind them as data. (Python: wgattn.page.verdict.Verdict) */
interface Verdict {
  state: "pass" | "partial" | "fail";
  unchecked: boolean;
  word: string;
  text: string;
  notes: string[];
  worst: JsonFloat;
  ran: ("browser" | "pyodide" | "native")[];
  not_run: NotRun[];
}

/** A runtime with no outputs in a run, and why. (Python: wgattn.page.verdict.NotRun) */
interface NotRun {
  runtime: "browser" | "pyodide" | "native";
  kind: "skipped" | "error";
  reason: string;
}

/** The verdict of a run of every kernel (PageSession.live_summary): how many passed in all three runtimes, and which did not. (Python: wgattn.page.verdict.LiveSummary) */
interface LiveSummary {
  state: "pass" | "partial" | "fail";
  word: string;
  text: string;
  notes: string[];
  passed: string[];
  native_only: string[];
  unchecked: string[];
  failed: string[];
}

/** heatmap(): a query head's probabilities, and what the picture shows. (Python: wgattn.pictures.Heatmap) */
interface Heatmap {
  width: number;
  height: number;
  rgba: string;
  legend: string;
  rows: number;
  cols: number;
  colours: string[];
  ticks: [number, string][];
  keys: [string, string][];
  rows_axis: string;
  cols_axis: string;
  kind: string;
  head: number;
  layout: string;
  max: number;
  top: number;
  masked: number;
  empty_rows: number;
  heads: number[];
  groups: [string, number, number][];
}

/** error_map(): |a - b| of one output; the page's session adds which output, runtimes and head. (Python: wgattn.pictures.ErrorPicture) */
interface ErrorPicture {
  width: number;
  height: number;
  rgba: string;
  legend: string;
  rows: number;
  cols: number;
  colours: string[];
  ticks: [number, string][];
  keys: [string, string][];
  rows_axis: string;
  cols_axis: string;
  kind: string;
  max_abs_err: JsonFloat;
  allowance: JsonFloat;
  over: number;
  identical: number;
  output?: string;
  a?: string;
  b?: string;
  head?: number;
}

/** GridItem (Python: wgattn.page.replies.GridItem) */
interface GridItem {
  kernel: string;
  case: string;
}

/** A kernel this device cannot run at all, or (with `case`) one case it cannot take. (Python: wgattn.page.replies.GridSkip) */
interface GridSkip {
  kernel: string;
  reason: string;
  case?: string;
}

/** PageSession.grid_start: the (kernel, case) items to run, and the kernels skipped. (Python: wgattn.page.replies.GridStart) */
interface GridStart {
  job: number;
  items: GridItem[];
  skipped: GridSkip[];
}

/** GridRow (Python: wgattn.page.grid.GridRow) */
interface GridRow {
  case: string;
  output: string;
  max_abs_err: JsonFloat;
  allowance: JsonFloat;
  pass: boolean;
  naive_err?: JsonFloat;
  where?: Where;
  error?: string;
  skipped?: string;
  kernel: string;
}

/** OutputRow (Python: wgattn.conformance.OutputRow) */
interface OutputRow {
  case: string;
  output: string;
  max_abs_err: JsonFloat;
  allowance: JsonFloat;
  pass: boolean;
  naive_err?: JsonFloat;
  where?: Where;
  error?: string;
  skipped?: string;
}

/** Where one output is wrong: its worst elements (index, got, ref, err, and for packed cases the sequence, row or key, head and visible partners), the |error| map and a likely class. (Python: wgattn.localise.Localisation) */
interface Where {
  output: string;
  axes: string[];
  likely: string;
  evidence: string[];
  worst: WorstElement[];
  map: WhereMap | null;
}

/** WhereMap (Python: wgattn.localise.ErrorMap) */
interface WhereMap {
  rows: string;
  blocks_of: string;
  blocks: number[][];
  ratio: number[][];
}

/** One of the worst elements; in a packed case also where it sits: its sequence, its row (or, for an output by keys, its key), head and column, and the visible partners it sums over. (Python: wgattn.localise.WorstElement) */
interface WorstElement {
  index: number[];
  got: JsonFloat;
  ref: JsonFloat;
  err: JsonFloat;
  sequence?: number;
  row?: number;
  key?: number;
  head?: number;
  column?: number;
  keys?: number[];
  queries?: number[];
  terms?: number;
}

/** ProbeReport (Python: wgattn.precision.ProbeReport) */
interface ProbeReport {
  adapter: Record<string, unknown>;
  functions: FunctionError[];
}

/** One built-in's row: its worst error in float32 ulps and absolute, and whether that is within what WGSL allows (None where WGSL states no bound). (Python: wgattn.precision.FunctionReport) */
interface FunctionError {
  name: string;
  expr: string;
  domain: string;
  wgsl_allows: string;
  samples: number;
  max_ulps: JsonFloat;
  max_abs: JsonFloat;
  within_wgsl: boolean | null;
  worst: ProbeWorst;
}

/** ProbeWorst (Python: wgattn.precision.Worst) */
interface ProbeWorst {
  args: number[];
  got: JsonFloat;
  exact: JsonFloat;
}

/** One row of a benchmark: an implementation at one shape in one runtime, its median time over the protocol's rounds with their spread, and what a reader needs to trust or redo it. (Python: wgattn.bench.Record) */
interface BenchRecord {
  op: string;
  impl: string;
  shape: [number, number, number, number];
  causal: boolean;
  dtype: string;
  runtime: string;
  mode: string;
  config: string;
  adapter: string;
  browser: string;
  flags: string[];
  median_ms: number;
  tflops: number;
  min_ms: number;
  q1_ms: number;
  q3_ms: number;
  max_ms: number;
  spread: number;
  wide: boolean;
  rounds: number;
  reps: number;
  warmup_s: number;
  warmed: boolean;
  timer: string;
  timer_resolution_ns: number;
  repeat: number;
  time: string;
  commit: string;
  variant: string;
}

/** One job of a benchmark: one impl at one shape. (Python: wgattn.page.replies.BenchItem) */
interface BenchJob {
  index: number;
  op: string;
  impl: string;
  config: string;
  shape: number[];
  causal: boolean;
  flops: number;
  dtype: string;
  plans: number;
  check: string;
  variant: string;
}

/** BenchSkip (Python: wgattn.page.replies.BenchSkip) */
interface BenchSkip {
  impl: string;
  reason: string;
}

/** The protocol's knobs (defaults: what `wgattn bench` and the page use). (Python: wgattn.protocol.Protocol) */
interface BenchProtocol {
  rounds: number;
  warmup_s: number;
  warmup_cap_s: number;
  settle_s: number;
  settle_rounds: number;
  settle_tol: number;
  min_sample_ms: number;
  resolutions_per_sample: number;
  max_sample_ms: number;
  wide: number;
  max_reps: number;
}

/** The jobs timed together, interleaved (wgattn.protocol): every impl at one shape. (Python: wgattn.page.replies.BenchSeries) */
interface BenchSeries {
  shape: number[];
  jobs: number[];
}

/** PageSession.bench_start: the schedule, the baseline and the limits the request met. (Python: wgattn.page.replies.BenchStart) */
interface BenchStart {
  bench: number;
  protocol: BenchProtocol;
  repeat: number;
  jobs: BenchJob[];
  series: BenchSeries[];
  stamps_kept: number;
  skipped: BenchSkip[];
  op: string;
  baseline: string;
  impls: string[];
  seq_lens: number[];
  limits: Record<string, unknown>;
}

/** PageSession.bench_warm: whether to stop warming, and whether the warm-up settled. (Python: wgattn.page.replies.BenchWarm) */
interface BenchWarm {
  done: boolean;
  warmed: boolean;
}

/** PageSession.bench_warm_reps: per entry of a series, dispatches per warm-up sample. (Python: wgattn.page.replies.BenchWarmReps) */
interface BenchWarmReps {
  reps: number[];
}

/** PageSession.bench_calibrate: per entry of a series, dispatches per sample and its timer's resolution (ns). (Python: wgattn.page.replies.BenchCalibration) */
interface BenchCalibration {
  reps: number[];
  resolution_ns: number[];
}

type BenchPlan = BenchPlanned | BenchSkipped;

/** PageSession.bench_plan: plan number `plan_index` of a job's `count`. (Python: wgattn.page.replies.BenchPlanned) */
interface BenchPlanned {
  run: number;
  plan: Plan;
  count: number;
}

/** PageSession.bench_plan: why the job is skipped (its kernel cannot take its sizes). (Python: wgattn.page.replies.BenchSkipped) */
interface BenchSkipped {
  skipped: string;
}

/** An output of a case on inputs the GPU filled, against the float64 reference on the parts named (`Interface.check_filled`): a benchmark times a kernel only once it is `ok`. (Python: wgattn.interfaces.base.FilledCheck) */
interface BenchCheck {
  ok: boolean;
  max_abs_err: JsonFloat;
  allowed: number;
  pairs: number[][];
}

/** One bandwidth record (`record`): a kernel's, the copy's or the read's GB/s on one case. (Python: wgattn.bandwidth.BandwidthRecord) */
interface BandwidthRecord {
  kind: string;
  case: string;
  shape: Record<string, unknown>;
  impl: string;
  dtype: string;
  runtime: string;
  browser: string;
  flags: string[];
  mode: string;
  splits: number;
  rule: boolean;
  config: string;
  adapter: string;
  bytes: number;
  gbps: number;
  pct_of_copy: number;
  median_ms: number;
  min_ms: number;
  q1_ms: number;
  q3_ms: number;
  max_ms: number;
  spread: number;
  wide: boolean;
  rounds: number;
  reps: number;
  warmup_s: number;
  warmed: boolean;
  timer: string;
  timer_resolution_ns: number;
  repeat: number;
  verified: Record<string, unknown> | null;
  time: string;
  commit: string;
}

/** A file's records by kind: dense ops' (TFLOP/s) and bandwidth ones' (GB/s). (Python: wgattn.page.bench_import.Imported) */
interface ImportedRecords {
  bench: Record<string, unknown>[];
  bandwidth: BandwidthRecord[];
}

/** A committed history file (bench/history/<date>-<machine>[-what].jsonl) and its records. (Python: wgattn.page.bench_import.RecordSource) */
interface RecordSource {
  path: string;
  name: string;
  date: string;
  records: ImportedRecords;
}

/** The page's wgattn.page.PageSession under Pyodide: JSON in, JSON out. (Python: wgattn.page.session.PageSession) */
interface WgattnPage {
  /** Store the browser's read-back bytes of one buffer (a JS Uint8Array or bytes). */
  add_buffer(run: number, name: string, data: Uint8Array): void;
  /** JSON {kernel id: why the browser's device cannot run it, "" when it can} (wgattn.target: the one answer, which the page only shows). */
  availability(): string;
  /** After the warm-up: JSON {"reps", "resolution_ns"} per entry (bench_jobs.calibrate). */
  bench_calibrate(bench_id: number, state_json: string): string;
  /** Job `index`'s `check` buffer (a JS Uint8Array or bytes) against the float64 reference: JSON BenchCheck. Such a job is recorded only once its check passed. */
  bench_check(bench_id: number, index: number, data: Uint8Array): string;
  /** JSON [plan]: the plans that fill job `index`'s inputs on the GPU, each binding the timed plan's buffer of its name (the page runs them on those buffers, then the job once, then sends its `check` buffer to bench_check, before anything is timed); [] for a job with no `check`. */
  bench_fills(bench_id: number, index: number): string;
  /** A dropped file's records (`wgattn bench --json`'s, a bench/history file's, decode records), checked, as JSON {"bench": [...], "bandwidth": [...]} (ValueError saying what is wrong). */
  bench_import(text: string): string;
  /** Plan `plan_index` of job `index`: JSON {"run", "plan", "count"} (bytes via plan_bytes, freed by bench_release), or {"skipped": why} when the kernel cannot build this job's plan. */
  bench_plan(bench_id: number, index: number, plan_index?: number): string;
  /** The record of job `index` from what the page measured: JSON of `wgattn bench --json`'s shape (wgattn.page.bench_jobs.record). */
  bench_record(bench_id: number, index: number, payload_json: string): string;
  /** Forget a timed plan (its bytes are on the GPU already). */
  bench_release(run: number): void;
  /** JSON: the order of every round of a series of `n_entries` (wgattn.protocol.schedule). */
  bench_schedule(bench_id: number, n_entries: number): string;
  /** JSON {"interface", "fields"} of an op timed as bandwidth (decode): the interface that serves it and its configuration's fields (the form the page shows for it, labelled). */
  bench_schema(op: string): string;
  /** Bandwidth records (a benchmark's, JSON) with each one's share of its series' copy filled in (wgattn.bandwidth.copy_shares), as JSON. */
  bench_shares(records_json: string): string;
  /** The request checked and its jobs listed (wgattn.page.bench_jobs.start; a dense op's, or one timed as bandwidth, decode): JSON {"bench", "op", "baseline", "impls", "seq_lens", "protocol", "repeat", "jobs", "series", "stamps_kept", "skipped", "limits"} (BenchStart). One benchmark at a time: the previous one, and its plans, are freed. */
  bench_start(request_json: string): string;
  /** What is wrong with a benchmark request, as bench_start would say it (the field and what is allowed), or "" when bench_start takes it: the page checks its forms as they are typed. Nothing is started or held. */
  bench_validate(request_json: string): string;
  /** After a warm-up round: JSON {"done", "warmed"} (wgattn.page.bench_jobs.warm). */
  bench_warm(bench_id: number, state_json: string): string;
  /** After the priming runs: JSON {"reps"} per entry for the warm-up (bench_jobs.warm_reps). */
  bench_warm_reps(bench_id: number, state_json: string): string;
  /** JSON picture of |a - b| for one output and query head of a finished run. */
  error_map(run: number, output: string, a: string, b: string, head?: number): string;
  /** Compare every pair of runtimes on every output (wgattn.page.compare) and judge the run (wgattn.page.verdict): JSON LiveResult {kernel, config, pairs, runtimes, verdict, ...}. The run is kept, for its pictures, among the last KEEP_FINISHED finished ones. */
  finish(run: number, browser_json: string, native_json: string | null): string;
  /** Judge a run the browser finished (or report its `error`): JSON rows per output. The job is freed once every item is judged. */
  grid_judge(run: number, error?: string): string;
  /** Plan item `index` of a job: JSON {"run", "plan"} (bytes via plan_bytes). */
  grid_prepare(job: number, index: number): string;
  /** {"interface", "source"?} -> JSON {"job", "items": [{"kernel", "case"}], "skipped": [{"kernel", "reason"}]} (wgattn.page.grid). One grid at a time: the previous job, and its runs, are freed. */
  grid_start(request_json: string): string;
  /** JSON picture of query head `head`'s attention probabilities of a finished run. */
  heatmap(run: number, head?: number): string;
  /** JSON {interface: [{name, type, default, choices?}]}: the live form's fields per interface. */
  live_schema(): string;
  /** The verdict of a run of every kernel from each finished run's {"kernel", "verdict"}: JSON LiveSummary (wgattn.page.verdict.summarise). */
  live_summary(runs_json: string): string;
  /** The initial bytes of one buffer of a prepared plan (becomes a Uint8Array in JS). */
  plan_bytes(run: number, buffer: string): PyProxy<Uint8Array>;
  /** {"kernel", "config"} -> JSON {"run", "plan", "digest", "config", "kernel", "interface", "requires", "precision", "heads"}; ValueError on bad input. The plan's buffer bytes are fetched separately with `plan_bytes` (JSON carries no bytes). */
  prepare(request_json: string): string;
  /** The probe's report from the browser's read-back: JSON {adapter, functions}; kept for grid_judge's suspects. */
  probe_judge(run: number, adapter_json?: string): string;
  /** JSON {"run", "plan"} of the precision probe (bytes via plan_bytes). */
  probe_prepare(): string;
  /** Free whatever `id_` names (a run, a finished run, a grid job and its runs, a benchmark and its runs): the page's error paths call it when a run or job will not be completed. Freeing what is already gone is no error (False): it may have completed meanwhile. */
  release(id_: number): boolean;
  /** `held()` as JSON (for the page and its tests). */
  stats(): string;
  /** Build this session's later plans for the browser's device: `target_json` is what static/webgpu.js reports of it ({name, features, limits (kebab-case), software, subgroup_matrix_configs}: wgattn.target.Target.from_json). Tile shapes are chosen to fit it, and each plan says whether, and why not, the device can run it. */
  use_target(target_json: string): void;
}
