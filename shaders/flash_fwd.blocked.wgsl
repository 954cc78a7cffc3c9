// flash_fwd.blocked (and flash_fwd.blocked_f16, define F16): FlashAttention-2 forward over packed
// variable-length sequences with register-blocked micro-tiles; wgattn's contract: GQA, (left,
// right) windows in both alignments, softcap, ALiBi, attention sinks, out and a natural-log lse.
//
//   Per sequence b, query row i (head h), key j (kv head g = h / (heads_q / heads_kv)):
//     s0_ij = scale * q_i . k_j;  s_ij = softcap * tanh(s0_ij / softcap) if softcap > 0 else s0_ij
//     s_ij -= slope_h * |j - (i + offset)|                        (alibi_on; slope_h = alibi_sinks[h])
//     z_i = sum_j exp(s_ij) over visible j  (+ exp(sink_h) with sinks_on; sink_h = alibi_sinks[heads_q + h])
//     out_i = sum_j exp(s_ij) / z_i v_j over visible j;  lse_i = log z_i
//   Visible: with offset = len_k - len_q (bottom-right) or 0 (top-left),
//     (window_left < 0 or j >= i + offset - window_left) and (window_right < 0 or j <= i + offset + window_right).
//   A row with no visible key gets out = 0 and lse = -inf (sink_h with sinks_on). The sink is the
//   online softmax's starting state: every invocation of a row starts its running max at sink_h,
//   and column group 0 its partial sum at exp(sink_h - m) = 1 (a key whose value is 0).
//
// Layout (token-major, f32): q, out [total_q, heads_q, D]; k, v [total_k, heads_kv, D];
// lse [total_q, heads_q]; cu_seqlens_* [batch_size + 1].
//
// Work split: one workgroup of WG invocations per (block of BR query rows, sequence, query head),
// heads fastest (the heads of one kv group share K/V through the cache). Invocation t is row group
// rg = t % RG (RG = BR / 4) and column group cg = t / RG (NCG = WG / RG groups); it owns the four
// rows rg + RG * m (m < 4), so that neighbouring invocations read neighbouring rows:
//   - scores: a 4 x TN micro-tile, keys cg + NCG * n of the BC-key tile (TN = BC / NCG). Per vec4
//     column of the head dim, 4 q reads and TN k reads (broadcast) feed 4 * TN dot products: the
//     workgroup-memory pipe no longer sets the pace (one 16-byte read per four multiply-adds did).
//   - output: a 4 x CPT micro-tile of vec4 columns cg + NCG * i: per key, one read of the four
//     rows' probabilities (one vec4) and CPT reads of v feed 16 * CPT multiply-adds.
// K and V of the next tile are loaded into registers while the current tile is computed, and
// stored to workgroup memory once it is no longer read: global latency hides behind arithmetic,
// three barriers a tile. With head_dim % 4 == 0 (define VEC4) rows move as vec4.
// Online softmax with exp2 (the cheaper, more accurate built-in) on differences of scores,
// exp2((s - m) * log2(e)): scaling scores to log2 units before the max is taken off would round a
// large score (|s| ~ 70) to 4e-6, 60x a naive float32 run's error. The running max of a row is the same in the NCG invocations sharing it: each takes
// the maximum of the NCG partial maxima through workgroup memory; row sums stay partial per
// invocation until the end. The pre-scaled Q block stays in workgroup memory (rows padded to an
// odd number of vec4, QS, so four rows read together hit different banks); K and V tiles of BC
// keys take turns in one buffer (KS vec4 columns, zero-padded to NCG * CPT: no guard in the loop).
// Key tiles lie inside the union of the block's visible bands. Tile shapes are chosen per adapter
// from the registry's candidates (wgattn.registry: the first that fits its workgroup storage).
// Every index is guarded in this code (the kernel is registered as trusted; docs/performance.md).
// The register arrays are defines (MAX_CPT, MAX_PF): their sizes up to head_dim 256, doubled and
// quadrupled past it, where a row of 512 needs CPT = 16 columns with 8 column groups and each
// invocation of a small workgroup moves more of a tile.
// F16: Q, K and V are staged as f16 (half the workgroup memory and reads); arithmetic is f32.
// Reference: wgattn.reference.varlen_attention_fwd, keywords mapped in wgattn/interfaces/flash_fwd.py.
#if F16
enable f16;
alias T = f16;
#else
alias T = f32;
#endif

#include "lib/varlen.wgsl"
#include "lib/softcap.wgsl"

override WG: u32;    // invocations per workgroup (= RG * NCG)
override BR: u32;    // query rows per workgroup (a multiple of 4)
override BC: u32;    // keys per tile (a multiple of NCG)
override D4: u32;    // vec4 columns of a row: ceil(head_dim / 4)
override QS: u32;    // vec4 stride of a staged q row: D4 rounded up to an odd number
override RG: u32;    // row groups: BR / 4
override NCG: u32;   // column groups: WG / RG
override TN: u32;    // keys per invocation per tile: BC / NCG, at most MAX_TN
override CPT: u32;   // vec4 output columns per invocation: ceil(D4 / NCG), at most MAX_CPT
override KS: u32;    // vec4 stride of a staged k/v row: NCG * CPT
override PF: u32;    // vec4 of k (and of v) each invocation moves per tile: ceil(BC * KS / WG)
#const MAX_PF
const MAX_TN: u32 = 8u;
#const MAX_CPT
const LOWEST: f32 = -3.4028234663852886e38;  // stands for -inf in the running max
const LOG2E: f32 = 1.4426950408889634;

#include "interfaces/flash_fwd.wgsl"

var<workgroup> q_tile: array<vec4<T>, BR * QS>;    // the block's q rows, pre-scaled
var<workgroup> k_tile: array<vec4<T>, BC * KS>;    // the tile's k rows
var<workgroup> v_tile: array<vec4<T>, BC * KS>;    // the tile's v rows
var<workgroup> p_tile: array<vec4<f32>, BC * RG>;  // [key][row group]: the 4 rows' probabilities
var<workgroup> partial: array<f32, NCG * BR>;      // [column group][row]: partial maxima / sums

// Vec4 column c of row `row` (token-major index token * heads + head) of a [*, heads, D] tensor;
// zeros past head_dim.
#if VEC4
fn load_q(row: u32, c: u32, dim: u32) -> vec4<f32> {
  return q[row * (dim / 4u) + c];
}
fn load_kv(from_v: bool, row: u32, c: u32, dim: u32) -> vec4<f32> {
  if (from_v) {
    return v[row * (dim / 4u) + c];
  }
  return k[row * (dim / 4u) + c];
}
#else
#include "lib/flash_fwd_loads.wgsl"
#endif

// This invocation's share of a tile of BC keys from t0 (rows past the band's end and columns past
// head_dim are zeros): vec4 number lid + WG * f of the tile is row (lid + WG * f) / KS.
fn fetch_kv(from_v: bool, lid: u32, t0: i32, hi: i32, k_start: i32, hkv: u32, kvh: u32, dim: u32,
            d4: u32) -> array<vec4<f32>, MAX_PF> {
  var r: array<vec4<f32>, MAX_PF>;
  for (var f = 0u; f < PF; f++) {
    let e = lid + WG * f;
    let j = t0 + i32(e / KS);
    let c = e % KS;
    r[f] = vec4<f32>(0.0);
    if (e < BC * KS && j < hi && c < d4) {
      r[f] = load_kv(from_v, u32(k_start + j) * hkv + kvh, c, dim);
    }
  }
  return r;
}

@compute @workgroup_size(WG)
fn flash_fwd(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  #include "lib/flash_fwd_grid.wgsl"
  let block = w / (hq * nb);
  #include "lib/flash_fwd_block.wgsl"

  let rg = lid % RG;
  let cg = lid / RG;
  // This invocation's rows rg + RG * m and their visible keys [row_lo, row_hi).
  let rows = row0 + i32(rg) + i32(RG) * vec4<i32>(0, 1, 2, 3);
  var row_lo = vec4<i32>(0);
  var row_hi = vec4<i32>(len_k);
  if (wl >= 0) {
    row_lo = max(row_lo, rows + offset - wl);
  }
  if (wr >= 0) {
    row_hi = min(row_hi, rows + offset + wr + 1);
  }

  // Stage the block's q rows, pre-scaled (softcap, when on, applies to the scaled score).
  let d4 = (dim + 3u) / 4u;
  for (var e = lid; e < BR * QS; e += WG) {
    let r = e / QS;
    let c = e % QS;
    var x = vec4<f32>(0.0);
    if (row0 + i32(r) <= row_last && c < d4) {
      x = load_q(u32(q_start + row0 + i32(r)) * hq + head, c, dim) * params.scale;
    }
    q_tile[e] = vec4<T>(x);
  }
  var k_next = fetch_kv(false, lid, band.x, band.y, k_start, hkv, kvh, dim, d4);
  var v_next = fetch_kv(true, lid, band.x, band.y, k_start, hkv, kvh, dim, d4);
  for (var f = 0u; f < PF; f++) {
    if (lid + WG * f < BC * KS) {
      k_tile[lid + WG * f] = vec4<T>(k_next[f]);
      v_tile[lid + WG * f] = vec4<T>(v_next[f]);
    }
  }
  k_next = fetch_kv(false, lid, band.x + i32(BC), band.y, k_start, hkv, kvh, dim, d4);
  v_next = fetch_kv(true, lid, band.x + i32(BC), band.y, k_start, hkv, kvh, dim, d4);
  workgroupBarrier();  // q and the first tile are staged

  let cap = params.softcap;
  let alibi = params.alibi_on != 0u;
  let slope = alibi_sinks[head];
  let pos = rows + offset;  // the rows' positions on the diagonal, ALiBi's origin
  let sinks = params.sinks_on != 0u;
  // running max of the four rows' scores, from the sink when there is one
  var m = vec4<f32>(select(LOWEST, alibi_sinks[hq + head], sinks));
  // partial row sums over this invocation's keys; the sink's term (1 at m = sink) in group 0's
  var l = vec4<f32>(select(0.0, 1.0, sinks && cg == 0u));
  var o: array<array<vec4<f32>, MAX_CPT>, 4>;
  for (var mm = 0u; mm < 4u; mm++) {
    for (var i = 0u; i < CPT; i++) {
      o[mm][i] = vec4<f32>(0.0);
    }
  }

  // Per tile: scores (k_tile) | barrier | softmax, p_tile, next k stored | barrier | p v (v_tile)
  // | barrier | next v stored, the tile after next fetched. Each store lands a barrier before its read.
  for (var t0 = band.x; t0 < band.y; t0 += i32(BC)) {
    // Scores: s[n][mm] for key cg + NCG * n and row rg + RG * mm.
    var s: array<vec4<f32>, MAX_TN>;
    for (var n = 0u; n < TN; n++) {
      s[n] = vec4<f32>(0.0);
    }
    for (var c = 0u; c < D4; c++) {
      let q0 = vec4<f32>(q_tile[rg * QS + c]);
      let q1 = vec4<f32>(q_tile[(rg + RG) * QS + c]);
      let q2 = vec4<f32>(q_tile[(rg + 2u * RG) * QS + c]);
      let q3 = vec4<f32>(q_tile[(rg + 3u * RG) * QS + c]);
      for (var n = 0u; n < TN; n++) {
        let kk = vec4<f32>(k_tile[(cg + NCG * n) * KS + c]);
        s[n] += vec4<f32>(dot(q0, kk), dot(q1, kk), dot(q2, kk), dot(q3, kk));
      }
    }
    var tile_max = vec4<f32>(LOWEST);
    for (var n = 0u; n < TN; n++) {
      var x = s[n];
      if (cap > 0.0) {
        x = vec4<f32>(softcap_apply(x.x, cap), softcap_apply(x.y, cap),
                      softcap_apply(x.z, cap), softcap_apply(x.w, cap));
      }
      let j = vec4<i32>(t0 + i32(cg + NCG * n));
      if (alibi) {
        x -= slope * vec4<f32>(abs(j - pos));
      }
      x = select(vec4<f32>(LOWEST), x, (j >= row_lo) & (j < row_hi));
      s[n] = x;
      tile_max = max(tile_max, x);
    }
    for (var mm = 0u; mm < 4u; mm++) {
      partial[cg * BR + rg + mm * RG] = tile_max[mm];
    }
    workgroupBarrier();  // partial maxima written; k_tile is no longer read

    var row_max = m;
    for (var g = 0u; g < NCG; g++) {
      let at = g * BR + rg;
      row_max = max(row_max, vec4<f32>(partial[at], partial[at + RG], partial[at + 2u * RG],
                                       partial[at + 3u * RG]));
    }
    // Rows with nothing visible yet keep m = LOWEST: alpha = 1 scales zeros.
    let alpha = exp2((m - row_max) * LOG2E);
    m = row_max;
    l *= alpha;
    for (var n = 0u; n < TN; n++) {
      let x = s[n];
      let p = select(vec4<f32>(0.0), exp2((x - row_max) * LOG2E), x > vec4<f32>(LOWEST));
      l += p;
      p_tile[(cg + NCG * n) * RG + rg] = p;
    }
    for (var mm = 0u; mm < 4u; mm++) {
      for (var i = 0u; i < CPT; i++) {
        o[mm][i] *= alpha[mm];
      }
    }
    for (var f = 0u; f < PF; f++) {
      if (lid + WG * f < BC * KS) {
        k_tile[lid + WG * f] = vec4<T>(k_next[f]);
      }
    }
    workgroupBarrier();  // the probabilities are staged

    for (var jj = 0u; jj < BC; jj++) {
      let p = p_tile[jj * RG + rg];
      for (var i = 0u; i < CPT; i++) {
        let vv = vec4<f32>(v_tile[jj * KS + cg + NCG * i]);
        o[0][i] += p.x * vv;
        o[1][i] += p.y * vv;
        o[2][i] += p.z * vv;
        o[3][i] += p.w * vv;
      }
    }
    workgroupBarrier();  // v and the probabilities are no longer read
    for (var f = 0u; f < PF; f++) {
      if (lid + WG * f < BC * KS) {
        v_tile[lid + WG * f] = vec4<T>(v_next[f]);
      }
    }
    k_next = fetch_kv(false, lid, t0 + 2 * i32(BC), band.y, k_start, hkv, kvh, dim, d4);
    v_next = fetch_kv(true, lid, t0 + 2 * i32(BC), band.y, k_start, hkv, kvh, dim, d4);
  }

  // Row sums: the NCG partial sums of each row, through workgroup memory.
  workgroupBarrier();
  for (var mm = 0u; mm < 4u; mm++) {
    partial[cg * BR + rg + mm * RG] = l[mm];
  }
  workgroupBarrier();
  var total = vec4<f32>(0.0);
  for (var g = 0u; g < NCG; g++) {
    let at = g * BR + rg;
    total += vec4<f32>(partial[at], partial[at + RG], partial[at + 2u * RG], partial[at + 3u * RG]);
  }
  for (var mm = 0u; mm < 4u; mm++) {
    let i = rows[mm];
    if (i > row_last) {
      continue;
    }
    let row = u32(q_start + i) * hq + head;
    let visible = total[mm] > 0.0;
    let inv = select(0.0, 1.0 / total[mm], visible);
    for (var c = 0u; c < CPT; c++) {
      let col = cg + NCG * c;
      let x = o[mm][c] * inv;
#if VEC4
      if (col < d4) {
        out[row * d4 + col] = x;
      }
#else
      for (var e = 0u; e < 4u; e++) {
        let d = col * 4u + e;
        if (d < dim) {
          out[row * dim + d] = x[e];
        }
      }
#endif
    }
    if (cg == 0u) {
      lse[row] = select(neg_inf(), m[mm] + log(total[mm]), visible);
    }
  }
}
