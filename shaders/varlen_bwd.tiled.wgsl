// varlen_bwd.tiled: FlashAttention-2 backward over packed variable-length sequences, tiled, with
// wgattn's contract: GQA, (left, right) windows in both alignments, softcap, ALiBi, attention
// sinks, deterministic.
//
//   Per sequence b, query row i (head h), key j (kv head g = h / (heads_q / heads_kv)):
//     s0_ij = scale * q_i . k_j;  s_ij = softcap * tanh(s0_ij / softcap) if softcap > 0 else s0_ij
//     s_ij -= slope_h * |j - (i + offset)|  (alibi_on; the interface's alibi_slope(h))
//     P_ij  = exp(s_ij - lse_i)        on visible (i, j); rows with a non-finite lse contribute nothing
//             (a sink needs nothing here: lse holds its term, and the interface's own pass,
//             bwd_dsinks, takes its gradient)
//     delta_i = sum_d dout_i * out_i
//     dP_ij = dout_i . v_j;  dS_ij = P_ij * (dP_ij - delta_i) * (1 - tanh^2)  (the factor only with softcap;
//             softcap_slope computes it without cancellation)
//     dv_j = sum_{h in group(g)} sum_i P_ij dout_i;   dk_j = scale * sum_{h in group(g)} sum_i dS_ij q_i
//     dq_i = scale * sum_j dS_ij k_j
//   Visible: with offset = len_k - len_q (bottom-right, align_top_left == 0) or 0 (top-left),
//     (window_left < 0 or j >= i + offset - window_left) and (window_right < 0 or j <= i + offset + window_right);
//     causal is folded in by the host (window_right = min(right, 0), -1 -> 0).
//   Rows with no visible key get dq = 0; keys no row sees get dk = dv = 0.
//
// Layout (token-major, f32): q, out, dout, dq [total_q, heads_q, D]; k, v [total_k, heads_kv, D];
// dkv [2, total_k, heads_kv, D] (dk then dv); stats [2, total_q, heads_q]: the forward's lse (the
// host writes it), then delta (pass bwd_preprocess writes it), then [2, heads_q]: the ALiBi slopes
// and the sinks; cu_seqlens_* [batch_size + 1].
//
// Passes (grids as the interface gives them: WG rows per workgroup, the workgroup count folded
// into x and y past 65535):
//   bwd_preprocess  one invocation per (query token, query head): delta = dout . out.
//   bwd_dkdv        a workgroup owns WG rows (key, kv head), taken HEAD-MAJOR (row = g * total_k
//                   + token): WG consecutive keys of one kv head and, except in the few blocks
//                   that cross a sequence or head boundary, of one sequence. T = 2 * ceil(D / 32)
//                   invocations share a key: T / 2 "k" invocations each hold 32 columns of k
//                   (pre-scaled) and of the dk sums, T / 2 "v" invocations 32 columns of v and of
//                   the dv sums, all in mat4x4 registers (no arrays: nothing is spilled at any
//                   head dim). For each query head of the group, the workgroup stages BQ query
//                   rows (q, dout, lse, delta) at a time in workgroup memory, only tiles inside
//                   the union of the block's visible bands. Per tile: (1) each invocation writes
//                   one partial per row, q.k or dout.v over its 32 columns; (2) the key's T
//                   invocations split the rows, add the partials of each (in a fixed order:
//                   bit-identical runs) and turn them into P and dS; (3) the k invocations add
//                   dS * q, the v invocations P * dout over the tile's rows into their columns.
//                   Every invocation of a key reads the same staged row at once (a broadcast),
//                   and staged rows are interleaved in 16-column slices so that a warp's
//                   invocations read adjacent vec4 (no bank conflicts up to D = 128). A block
//                   crossing a boundary is walked as segments (runs of rows with one sequence and
//                   kv head), each with its own staged queries: correct, just slower.
//   bwd_dq          the same for query rows (row = h * total_q + token, BK keys staged per tile):
//                   "q" invocations hold 32 columns of q (pre-scaled), "dout" invocations 32 of
//                   dout, for the partial scores; then each of the row's T invocations adds
//                   dS * k into 16 of its dq columns.
//   The two kinds of invocation are the two halves of a workgroup (whole warps where WG * T / 2
//   is a multiple of 32): both run the same instructions on different staged rows.
// Long sums (dv of an early causal key sums thousands of terms) are taken in two levels, about
// SUM_BLOCK terms into a block sum that then joins the total, and dot products in partial sums
// (four per 32 columns, then the T / 2 partials), which keeps the float32 error near that of a
// blocked matrix product.
// No atomics: every output element is written by exactly one invocation, so runs are bit-identical.
// VEC4 (a define, where head_dim % 4 == 0): the [.., D] tensors read and written as vec4 rows.
// Override constants: WG rows and T invocations per row (WG * T <= 128 invocations), BQ query rows
// per dkdv tile, BK keys per dq tile; workgroup memory per tile row: two staged rows of 64 * T
// bytes, 4 * (WG * T + 1) bytes of partials (and 8 for lse, delta): the registry picks BQ and BK
// for 16 KiB. head_dim <= 256 (T <= 16; the registry refuses more).
// Reference: wgattn.reference.varlen_attention_bwd, keywords mapped in wgattn/interfaces/varlen_bwd.py.

override WG: u32;             // rows per workgroup: keys (bwd_dkdv) or query rows (bwd_dq, bwd_preprocess)
override T: u32;              // invocations per row in bwd_dkdv and bwd_dq: 2 * ceil(head_dim / 32)
override BQ: u32;             // query rows per staged tile (bwd_dkdv)
override BK: u32;             // keys per staged tile (bwd_dq)
const SUM_BLOCK: u32 = 32u;   // terms summed into a block sum before it joins the total
const LOG2E: f32 = 1.4426950408889634;
const EMPTY_LSE: f32 = 1.0e30; // stands for a non-finite lse in a tile: exp(s - EMPTY_LSE) is 0

#include "lib/varlen.wgsl"
#include "lib/softcap.wgsl"

#include "interfaces/varlen_bwd.wgsl"
#include "lib/varlen_tokens.wgsl"

// Staged rows: 4 * T vec4 columns (D rounded up to a multiple of 32, zeros past D), interleaved
// in 16-column slices: vec4 column 4 * s + c of a row at c * T + s. Partials: [tile row][invocation],
// rows WG * T + 1 floats apart (no bank conflicts when a key's invocations read the partials of
// different rows). Each pass uses only its own arrays: bwd_dkdv qo_tile .. x_q, bwd_dq kv_tile and
// x_k (each <= 16 KiB).
var<workgroup> qo_tile: array<vec4<f32>, 2u * BQ * 4u * T>;  // BQ q rows, then BQ dout rows
var<workgroup> lse_tile: array<f32, BQ>;
var<workgroup> delta_tile: array<f32, BQ>;
var<workgroup> x_q: array<f32, BQ * (WG * T + 1u)>;          // partials, then P and dS
var<workgroup> kv_tile: array<vec4<f32>, 2u * BK * 4u * T>;  // BK k rows, then BK v rows
var<workgroup> x_k: array<f32, BK * (WG * T + 1u)>;          // partials, then dS

// A staged row's 16-column slice (4 vec4 columns, T apart from `o`).
fn qo_slice(o: u32) -> mat4x4<f32> {
  return mat4x4<f32>(qo_tile[o], qo_tile[o + T], qo_tile[o + 2u * T], qo_tile[o + 3u * T]);
}

fn kv_slice(o: u32) -> mat4x4<f32> {
  return mat4x4<f32>(kv_tile[o], kv_tile[o + T], kv_tile[o + 2u * T], kv_tile[o + 3u * T]);
}

fn workgroup_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return wid.y * nwg.x + wid.x;
}

#if VEC4
// Four columns d .. d + 3 (d % 4 == 0) of a row starting at `at` (at % 4 == 0), zero from column
// `dim` on: one vec4 load (the interface binds vec4 rows where head_dim % 4 == 0). The index is
// clamped to the row's last vec4: every read stays inside the row, also where the runtime does
// no bounds checks (the kernel is registered as trusted).
fn q4(at: u32, d: u32, dim: u32) -> vec4<f32> {
  return select(vec4<f32>(0.0), q[(at + min(d, dim - 4u)) / 4u], d < dim);
}

fn do4(at: u32, d: u32, dim: u32) -> vec4<f32> {
  return select(vec4<f32>(0.0), dout[(at + min(d, dim - 4u)) / 4u], d < dim);
}

fn k4(at: u32, d: u32, dim: u32) -> vec4<f32> {
  return select(vec4<f32>(0.0), k[(at + min(d, dim - 4u)) / 4u], d < dim);
}

fn v4(at: u32, d: u32, dim: u32) -> vec4<f32> {
  return select(vec4<f32>(0.0), v[(at + min(d, dim - 4u)) / 4u], d < dim);
}

// Vec4 a4 of a buffer (a 16-byte boundary).
fn q4a(a4: u32) -> vec4<f32> {
  return q[a4];
}

fn do4a(a4: u32) -> vec4<f32> {
  return dout[a4];
}

fn k4a(a4: u32) -> vec4<f32> {
  return k[a4];
}

fn v4a(a4: u32) -> vec4<f32> {
  return v[a4];
}
#else
// Four columns d .. d + 3 of a row starting at `at`, zero from column `dim` on. (One function per
// buffer: WGSL passes no storage pointers.) select evaluates both operands, so the index is
// clamped to the row's last column: every read stays inside the row, also where the runtime
// does no bounds checks (the kernel is registered as trusted).
fn q4(at: u32, d: u32, dim: u32) -> vec4<f32> {
  return vec4<f32>(select(0.0, q[at + min(d, dim - 1u)], d < dim), select(0.0, q[at + min(d + 1u, dim - 1u)], d + 1u < dim),
                   select(0.0, q[at + min(d + 2u, dim - 1u)], d + 2u < dim), select(0.0, q[at + min(d + 3u, dim - 1u)], d + 3u < dim));
}

fn do4(at: u32, d: u32, dim: u32) -> vec4<f32> {
  return vec4<f32>(select(0.0, dout[at + min(d, dim - 1u)], d < dim), select(0.0, dout[at + min(d + 1u, dim - 1u)], d + 1u < dim),
                   select(0.0, dout[at + min(d + 2u, dim - 1u)], d + 2u < dim), select(0.0, dout[at + min(d + 3u, dim - 1u)], d + 3u < dim));
}

fn k4(at: u32, d: u32, dim: u32) -> vec4<f32> {
  return vec4<f32>(select(0.0, k[at + min(d, dim - 1u)], d < dim), select(0.0, k[at + min(d + 1u, dim - 1u)], d + 1u < dim),
                   select(0.0, k[at + min(d + 2u, dim - 1u)], d + 2u < dim), select(0.0, k[at + min(d + 3u, dim - 1u)], d + 3u < dim));
}

fn v4(at: u32, d: u32, dim: u32) -> vec4<f32> {
  return vec4<f32>(select(0.0, v[at + min(d, dim - 1u)], d < dim), select(0.0, v[at + min(d + 1u, dim - 1u)], d + 1u < dim),
                   select(0.0, v[at + min(d + 2u, dim - 1u)], d + 2u < dim), select(0.0, v[at + min(d + 3u, dim - 1u)], d + 3u < dim));
}

// Four columns at element 4 * a4 (a 16-byte boundary, where D % 4 == 0): adjacent loads that
// a compiler may merge into one.
fn q4a(a4: u32) -> vec4<f32> {
  let x = 4u * a4;
  return vec4<f32>(q[x], q[x + 1u], q[x + 2u], q[x + 3u]);
}

fn do4a(a4: u32) -> vec4<f32> {
  let x = 4u * a4;
  return vec4<f32>(dout[x], dout[x + 1u], dout[x + 2u], dout[x + 3u]);
}

fn k4a(a4: u32) -> vec4<f32> {
  let x = 4u * a4;
  return vec4<f32>(k[x], k[x + 1u], k[x + 2u], k[x + 3u]);
}

fn v4a(a4: u32) -> vec4<f32> {
  let x = 4u * a4;
  return vec4<f32>(v[x], v[x + 1u], v[x + 2u], v[x + 3u]);
}

#endif

// 16 columns d .. d + 15 of a row of a buffer as a mat4x4 (zeros from column `dim` on).
fn k16(at: u32, d: u32, dim: u32) -> mat4x4<f32> {
  return mat4x4<f32>(k4(at, d, dim), k4(at, d + 4u, dim), k4(at, d + 8u, dim), k4(at, d + 12u, dim));
}

fn v16(at: u32, d: u32, dim: u32) -> mat4x4<f32> {
  return mat4x4<f32>(v4(at, d, dim), v4(at, d + 4u, dim), v4(at, d + 8u, dim), v4(at, d + 12u, dim));
}

fn q16(at: u32, d: u32, dim: u32) -> mat4x4<f32> {
  return mat4x4<f32>(q4(at, d, dim), q4(at, d + 4u, dim), q4(at, d + 8u, dim), q4(at, d + 12u, dim));
}

fn do16(at: u32, d: u32, dim: u32) -> mat4x4<f32> {
  return mat4x4<f32>(do4(at, d, dim), do4(at, d + 4u, dim), do4(at, d + 8u, dim), do4(at, d + 12u, dim));
}

// q . k over a 16-column slice: four vec4 products in two partial sums.
fn dot16(a: mat4x4<f32>, b: mat4x4<f32>) -> f32 {
  return (dot(a[0], b[0]) + dot(a[2], b[2])) + (dot(a[1], b[1]) + dot(a[3], b[3]));
}

#if VEC4
fn put4_dkv(at: u32, d: u32, dim: u32, x: vec4<f32>) {
  if (d < dim) { dkv[(at + d) / 4u] = x; }
}
#else
fn put4_dkv(at: u32, d: u32, dim: u32, x: vec4<f32>) {
  if (d < dim) { dkv[at + d] = x.x; }
  if (d + 1u < dim) { dkv[at + d + 1u] = x.y; }
  if (d + 2u < dim) { dkv[at + d + 2u] = x.z; }
  if (d + 3u < dim) { dkv[at + d + 3u] = x.w; }
}
#endif

fn put_dkv(at: u32, d0: u32, dim: u32, m: mat4x4<f32>) {
  put4_dkv(at, d0, dim, m[0]);
  put4_dkv(at, d0 + 4u, dim, m[1]);
  put4_dkv(at, d0 + 8u, dim, m[2]);
  put4_dkv(at, d0 + 12u, dim, m[3]);
}

#if VEC4
fn put4_dq(at: u32, d: u32, dim: u32, x: vec4<f32>) {
  if (d < dim) { dq[(at + d) / 4u] = x; }
}
#else
fn put4_dq(at: u32, d: u32, dim: u32, x: vec4<f32>) {
  if (d < dim) { dq[at + d] = x.x; }
  if (d + 1u < dim) { dq[at + d + 1u] = x.y; }
  if (d + 2u < dim) { dq[at + d + 2u] = x.z; }
  if (d + 3u < dim) { dq[at + d + 3u] = x.w; }
}
#endif

fn put_dq(at: u32, d0: u32, dim: u32, m: mat4x4<f32>) {
  put4_dq(at, d0, dim, m[0]);
  put4_dq(at, d0 + 4u, dim, m[1]);
  put4_dq(at, d0 + 8u, dim, m[2]);
  put4_dq(at, d0 + 12u, dim, m[3]);
}

@compute @workgroup_size(WG)
fn bwd_preprocess(@builtin(workgroup_id) wid: vec3<u32>,
                  @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
  let row = workgroup_index(wid, nwg) * WG + lid;  // t * heads_q + h
  let rows = params.total_q * params.heads_q;
  if (row >= rows) {
    return;
  }
  let dim = params.head_dim;
#if VEC4
  let base = row * (dim / 4u);
  var acc = vec4<f32>(0.0);  // four partial sums
  for (var c = 0u; c < dim / 4u; c++) {
    acc += dout[base + c] * out[base + c];
  }
  stats[rows + row] = (acc.x + acc.z) + (acc.y + acc.w);
#else
  let base = row * dim;
  var even: f32 = 0.0;
  var odd: f32 = 0.0;
  var d: u32 = 0u;
  for (; d + 1u < dim; d += 2u) {
    even += dout[base + d] * out[base + d];
    odd += dout[base + d + 1u] * out[base + d + 1u];
  }
  if (d < dim) {
    even += dout[base + d] * out[base + d];
  }
  stats[rows + row] = even + odd;
#endif
}

@compute @workgroup_size(WG * T)
fn bwd_dkdv(@builtin(workgroup_id) wid: vec3<u32>,
            @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
  // Everything up to the segment loop depends only on the workgroup: returns here are uniform.
  let total_k = params.total_k;
  let hkv = params.heads_kv;
  let kv_rows = total_k * hkv;
  let first = workgroup_index(wid, nwg) * WG;
  if (first >= kv_rows) {
    return;
  }
  let last = min(first + WG, kv_rows);  // this block's rows: [first, last)
  let dim = params.head_dim;
  let hq = params.heads_q;
  let group = hq / hkv;
  let rows_q = params.total_q * hq;
  let wl = params.window_left;
  let wr = params.window_right;
  let cap = params.softcap;
  let hp = T / 2u;          // invocations of one kind per key
  let half = WG * hp;       // the v invocations are lid >= half
  let stride = WG * T + 1u; // between tile rows of the partials
  let d4p = 4u * T;         // vec4 columns of a staged row

  // This invocation: key kk of the block (row = g * total_k + token), kind k (lid < half) or v,
  // columns [32 p, 32 p + 32); rank r among the key's T invocations (the rows it reduces).
  let is_v = lid >= half;
  let idx = lid - select(0u, half, is_v);
  let kk = idx / hp;
  let p = idx % hp;
  let r = select(0u, hp, is_v) + p;
  let d0 = 32u * p;
  let k_slot = kk * hp;          // the key's first k partial in a partials row (later: dS)
  let v_slot = half + kk * hp;   // its first v partial (later: P)
  let row = first + kk;
  let live = row < last;
  var mem_row = 0u;      // token * heads_kv + g: where its k, v, dk, dv live
  var row_lo = 0;        // the queries that see the key: [row_lo, row_hi] (sequence-local)
  var row_hi = -1;
  if (live) {
    let g = row / total_k;
    let tk = row % total_k;
    mem_row = tk * hkv + g;
    let b = seq_of_k(i32(tk));
    let len_q = cu_seqlens_q[b + 1u] - cu_seqlens_q[b];
    let len_k = cu_seqlens_k[b + 1u] - cu_seqlens_k[b];
    let j = i32(tk) - cu_seqlens_k[b];
    let offset = diagonal_offset(len_q, len_k, params.align_top_left);
    // Queries i that see key j.
    let seen_by = visible_queries(j, j, offset, len_q, wl, wr);
    row_lo = seen_by.x;
    row_hi = seen_by.y - 1;
  }
  let kv_base = mem_row * dim;
  // Its 32 columns of k (pre-scaled: softcap applies to the scaled score) or of v.
  var r0 = mat4x4<f32>();
  var r1 = mat4x4<f32>();
  if (live) {
    if (is_v) {
      r0 = v16(kv_base, d0, dim);
      r1 = v16(kv_base, d0 + 16u, dim);
    } else {
      r0 = params.scale * k16(kv_base, d0, dim);
      r1 = params.scale * k16(kv_base, d0 + 16u, dim);
    }
  }
  let toff = select(0u, BQ * d4p, is_v) + 2u * p;  // its slices in the staged q (or dout) rows
  let coef = select(k_slot, v_slot, is_v);           // where it finds dS (or P)
  var acc0 = mat4x4<f32>();   // dk (or dv) sums: total, then block
  var acc1 = mat4x4<f32>();
  var blk0 = mat4x4<f32>();
  var blk1 = mat4x4<f32>();
  var blk_rows = 0u;

  // Segments: runs of the block's rows with one kv head and one sequence.
  var seg = first;
  loop {
    if (seg >= last) {
      break;
    }
    let g = seg / total_k;
    let t0 = seg % total_k;
    let b = seq_of_k(i32(t0));
    let k_start = cu_seqlens_k[b];
    let k_end = cu_seqlens_k[b + 1u];
    let seg_end = min(last, g * total_k + u32(k_end));
    let q_start = cu_seqlens_q[b];
    let len_q = cu_seqlens_q[b + 1u] - q_start;
    let offset = diagonal_offset(len_q, k_end - k_start, params.align_top_left);
    let j_first = i32(t0) - k_start;
    let j_last = i32(seg_end - g * total_k) - 1 - k_start;
    // The queries that see some key of the segment: [i_lo, i_hi].
    let seen_by = visible_queries(j_first, j_last, offset, len_q, wl, wr);
    let i_lo = seen_by.x;
    let i_hi = seen_by.y - 1;
    let mine = live && row >= seg && row < seg_end;
    let jk = i32(row % total_k) - k_start;  // the key's position in the sequence (when `mine`)

    for (var hh = 0u; hh < group; hh++) {
      let h = g * group + hh;
      let slope = alibi_slope(h);
      for (var i0 = i_lo; i0 <= i_hi; i0 += i32(BQ)) {
        workgroupBarrier();  // the previous tile is no longer read
        for (var u = lid; u < BQ * d4p; u += WG * T) {
          let ii = u / d4p;
          let c = u % d4p;
          let i = i0 + i32(ii);
          var qx = vec4<f32>(0.0);
          var ox = vec4<f32>(0.0);
          if (i <= i_hi) {
            let at = (u32(q_start + i) * hq + h) * dim;
            if (dim % 4u != 0u) {
              qx = q4(at, 4u * c, dim);
              ox = do4(at, 4u * c, dim);
            } else if (4u * c < dim) {
              qx = q4a(at / 4u + c);
              ox = do4a(at / 4u + c);
            }
          }
          let slot = ii * d4p + (c % 4u) * T + c / 4u;
          qo_tile[slot] = qx;
          qo_tile[BQ * d4p + slot] = ox;
        }
        for (var ii = lid; ii < BQ; ii += WG * T) {
          let i = i0 + i32(ii);
          var l = EMPTY_LSE;
          var dl = 0.0;
          if (i <= i_hi) {
            let at = u32(q_start + i) * hq + h;
            let x = stats[at];
            if (is_finite_bits(x)) {
              l = x;
            }
            dl = stats[rows_q + at];
          }
          lse_tile[ii] = l;
          delta_tile[ii] = dl;
        }
        workgroupBarrier();
        // Keys of this segment that a row of the tile sees (the same for the T invocations of
        // a key; no barrier inside these branches).
        let act = mine && i0 <= row_hi && i0 + i32(BQ) > row_lo;
        if (act) {
          for (var ii = 0u; ii < BQ; ii++) {
            let o = toff + ii * d4p;
            x_q[ii * stride + lid] = dot16(qo_slice(o), r0) + dot16(qo_slice(o + 1u), r1);
          }
        }
        workgroupBarrier();
        if (act) {
          // The key's T invocations split the tile's rows: add the partials, P and dS.
          for (var ii = r; ii < BQ; ii += T) {
            let at = ii * stride;
            var s = 0.0;
            var dp = 0.0;
            for (var w = 0u; w < hp; w++) {
              s += x_q[at + k_slot + w];
              dp += x_q[at + v_slot + w];
            }
            var dfac = 1.0;
            if (cap > 0.0) {
              dfac = softcap_slope(s, cap);  // from the uncapped score
              s = softcap_apply(s, cap);
            }
            let i = i0 + i32(ii);
            if (params.alibi_on != 0u) {
              s -= slope * f32(abs(jk - (i + offset)));  // i32 difference first: exact at 64k positions
            }
            var pr = 0.0;
            if (i >= row_lo && i <= row_hi) {
              pr = exp2((s - lse_tile[ii]) * LOG2E);
            }
            x_q[at + v_slot] = pr;
            x_q[at + k_slot] = pr * dfac * (dp - delta_tile[ii]);
          }
        }
        workgroupBarrier();
        if (act) {
          // k invocations: dS * q; v invocations: P * dout.
          for (var ii = 0u; ii < BQ; ii++) {
            let x = x_q[ii * stride + coef];
            let o = toff + ii * d4p;
            blk0 += x * qo_slice(o);
            blk1 += x * qo_slice(o + 1u);
          }
          blk_rows += BQ;
          if (blk_rows >= SUM_BLOCK) {
            acc0 += blk0;
            acc1 += blk1;
            blk0 = mat4x4<f32>();
            blk1 = mat4x4<f32>();
            blk_rows = 0u;
          }
        }
      }
    }
    seg = seg_end;
  }

  if (!live) {
    return;
  }
  if (is_v) {
    let at = kv_rows * dim + kv_base;
    put_dkv(at, d0, dim, acc0 + blk0);
    put_dkv(at, d0 + 16u, dim, acc1 + blk1);
  } else {
    put_dkv(kv_base, d0, dim, params.scale * (acc0 + blk0));
    put_dkv(kv_base, d0 + 16u, dim, params.scale * (acc1 + blk1));
  }
}

@compute @workgroup_size(WG * T)
fn bwd_dq(@builtin(workgroup_id) wid: vec3<u32>,
          @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
  let total_q = params.total_q;
  let hq = params.heads_q;
  let rows_q = total_q * hq;
  let first = workgroup_index(wid, nwg) * WG;
  if (first >= rows_q) {
    return;
  }
  let last = min(first + WG, rows_q);
  let dim = params.head_dim;
  let hkv = params.heads_kv;
  let group = hq / hkv;
  let wl = params.window_left;
  let wr = params.window_right;
  let cap = params.softcap;
  let hp = T / 2u;
  let half = WG * hp;       // the dout invocations are lid >= half
  let stride = WG * T + 1u;
  let d4p = 4u * T;

  // This invocation: query row qq of the block (row = h * total_q + token), kind q (lid < half)
  // or dout, 32 columns [32 p, 32 p + 32) of q (or dout) for the scores; rank r among the row's
  // T invocations: the rows it reduces and its 16 dq columns [16 r, 16 r + 16).
  let is_do = lid >= half;
  let idx = lid - select(0u, half, is_do);
  let qq = idx / hp;
  let p = idx % hp;
  let r = select(0u, hp, is_do) + p;
  let d0 = 32u * p;
  let q_slot = qq * hp;          // the row's first q partial in a partials row (later: dS)
  let o_slot = half + qq * hp;   // its first dout partial
  let row = first + qq;
  let live = row < last;
  var mem_row = 0u;     // token * heads_q + h
  var col_lo = 0;       // the keys it sees: [col_lo, col_hi] (sequence-local)
  var col_hi = -1;
  var lse = 0.0;
  var delta = 0.0;
  if (live) {
    let h = row / total_q;
    let tq = row % total_q;
    mem_row = tq * hq + h;
    let b = seq_of_q(i32(tq));
    let len_q = cu_seqlens_q[b + 1u] - cu_seqlens_q[b];
    let len_k = cu_seqlens_k[b + 1u] - cu_seqlens_k[b];
    let i = i32(tq) - cu_seqlens_q[b];
    let offset = diagonal_offset(len_q, len_k, params.align_top_left);
    let sees = visible_keys(i, i, offset, len_k, wl, wr);
    col_lo = sees.x;
    col_hi = sees.y - 1;
    lse = stats[mem_row];
    if (!is_finite_bits(lse)) {
      col_hi = col_lo - 1;  // the row contributes nothing: dq = 0
      lse = 0.0;
    }
    delta = stats[rows_q + mem_row];
  }
  let q_base = mem_row * dim;
  var r0 = mat4x4<f32>();   // 32 columns of q (pre-scaled) or of dout
  var r1 = mat4x4<f32>();
  if (live) {
    if (is_do) {
      r0 = do16(q_base, d0, dim);
      r1 = do16(q_base, d0 + 16u, dim);
    } else {
      r0 = params.scale * q16(q_base, d0, dim);
      r1 = params.scale * q16(q_base, d0 + 16u, dim);
    }
  }
  let toff = select(0u, BK * d4p, is_do) + 2u * p;  // its slices in the staged k (or v) rows
  var acc = mat4x4<f32>();   // dq columns [16 r, 16 r + 16): total, then block
  var blk = mat4x4<f32>();
  var blk_keys = 0u;

  var seg = first;
  loop {
    if (seg >= last) {
      break;
    }
    let h = seg / total_q;
    let t0 = seg % total_q;
    let g = h / group;
    let b = seq_of_q(i32(t0));
    let q_start = cu_seqlens_q[b];
    let q_end = cu_seqlens_q[b + 1u];
    let seg_end = min(last, h * total_q + u32(q_end));
    let k_start = cu_seqlens_k[b];
    let len_k = cu_seqlens_k[b + 1u] - k_start;
    let offset = diagonal_offset(q_end - q_start, len_k, params.align_top_left);
    let i_first = i32(t0) - q_start;
    let i_last = i32(seg_end - h * total_q) - 1 - q_start;
    // The keys any row of the segment can see: [j_lo, j_hi].
    let sees = visible_keys(i_first, i_last, offset, len_k, wl, wr);
    let j_lo = sees.x;
    let j_hi = sees.y - 1;
    let mine = live && row >= seg && row < seg_end;
    let pos = i32(row % total_q) - q_start + offset;  // the row's diagonal position (when `mine`)
    let slope = alibi_slope(h);

    for (var j0 = j_lo; j0 <= j_hi; j0 += i32(BK)) {
      workgroupBarrier();  // the previous tile is no longer read
      for (var u = lid; u < BK * d4p; u += WG * T) {
        let jj = u / d4p;
        let c = u % d4p;
        let j = j0 + i32(jj);
        var kx = vec4<f32>(0.0);
        var vx = vec4<f32>(0.0);
        if (j <= j_hi) {
          let at = (u32(k_start + j) * hkv + g) * dim;
          if (dim % 4u != 0u) {
            kx = k4(at, 4u * c, dim);
            vx = v4(at, 4u * c, dim);
          } else if (4u * c < dim) {
            kx = k4a(at / 4u + c);
            vx = v4a(at / 4u + c);
          }
        }
        let slot = jj * d4p + (c % 4u) * T + c / 4u;
        kv_tile[slot] = kx;
        kv_tile[BK * d4p + slot] = vx;
      }
      workgroupBarrier();
      // Rows of this segment that see a key of the tile (the same for the T invocations of a row).
      let act = mine && j0 <= col_hi && j0 + i32(BK) > col_lo;
      if (act) {
        for (var jj = 0u; jj < BK; jj++) {
          let o = toff + jj * d4p;
          x_k[jj * stride + lid] = dot16(r0, kv_slice(o)) + dot16(r1, kv_slice(o + 1u));
        }
      }
      workgroupBarrier();
      if (act) {
        for (var jj = r; jj < BK; jj += T) {
          let at = jj * stride;
          var s = 0.0;
          var dp = 0.0;
          for (var w = 0u; w < hp; w++) {
            s += x_k[at + q_slot + w];
            dp += x_k[at + o_slot + w];
          }
          var dfac = 1.0;
          if (cap > 0.0) {
            dfac = softcap_slope(s, cap);  // from the uncapped score
            s = softcap_apply(s, cap);
          }
          let j = j0 + i32(jj);
          if (params.alibi_on != 0u) {
            s -= slope * f32(abs(j - pos));
          }
          var ds = 0.0;
          if (j >= col_lo && j <= col_hi) {
            ds = exp2((s - lse) * LOG2E) * dfac * (dp - delta);
          }
          x_k[at + q_slot] = ds;
        }
      }
      workgroupBarrier();
      if (act) {
        for (var jj = 0u; jj < BK; jj++) {
          blk += x_k[jj * stride + q_slot] * kv_slice(jj * d4p + r);
        }
        blk_keys += BK;
        if (blk_keys >= SUM_BLOCK) {
          acc += blk;
          blk = mat4x4<f32>();
          blk_keys = 0u;
        }
      }
    }
    seg = seg_end;
  }

  if (!live) {
    return;
  }
  put_dq(q_base, 16u * r, dim, params.scale * (acc + blk));
}
