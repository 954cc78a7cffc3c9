// paged_decode.split (and paged_decode.split_f16, define F16): decode attention over a paged KV cache, split
// across workgroups (flash-decoding): each sequence's keys are cut into num_splits chunks, one
// workgroup each, whose partial softmax states a second pass merges by their log-sum-exp.
//
//   Sequence b holds n = seq_lens[b] tokens in the cache, its Sq_new new ones last; new token i
//   sits at pos = n - Sq_new + i. Query head h reads kv head g = h / (heads_q / heads_kv) and sees
//   key j when j <= pos and (window_left < 0 or j >= pos - window_left):
//     s_j = scale * q . k_j;  s_j = softcap * tanh(s_j / softcap) if softcap > 0;
//     s_j += alibi_slopes[h] * (j - pos)
//     z = sum_j exp(s_j) (+ exp(sinks[h]) with sinks on);  out = sum_j exp(s_j) / z * v_j;  lse = log z
//   A row with nothing visible and no sink (an idle slot, n = 0) gets out = 0 and lse = -inf.
//
// Layout: q, out [B, Sq_new, Hq, D] f32; k_cache, v_cache [num_blocks, block_size, Hkv, D], f32 or
// (F16) f16, key j of sequence b in block block_table[b * max_blocks + j / BS] at slot j % BS
// (BS = block_size); seq_lens [B] i32; alibi_slopes, sinks [Hq] f32 (zero slopes when ALiBi is off:
// they add exactly nothing); lse [B, Sq_new, Hq]. Partial states, row gr = (b * Sq_new + i) * Hq + h:
// part_o [rows, num_splits, D4] (vec4, unnormalised) and part_ml [rows, num_splits] (max, sum).
//
// Pass 1, decode_split: one workgroup per (sequence, kv head, split, row block), row blocks fastest
// (the blocks of one split read the same keys, close together in time). A row block is RB of the
// G * Sq_new rows (query head of the group, new token) of one kv head, r = i * G + gh: every K/V
// element of the split is read from the cache once for all of them (a group larger than RB, set
// by the registers and workgroup memory one workgroup has, is cut into row blocks that each read
// the split once). The split's keys come in tiles of BC keys:
//   - K and V of the tile move from the cache to workgroup memory in coalesced vec4 loads, each
//     key found through the block table; the next tile is already in registers (prefetched while
//     this one is computed, as in flash_fwd.blocked), so the cache's latency hides behind work;
//   - scores: invocation t takes key t % BC and rows t / BC + SRG * m: dot products of the staged
//     k row (odd stride KS: no bank conflicts) with the staged, pre-scaled q rows (broadcast);
//     softcap, ALiBi and the mask applied; written to s_tile [RB, BC];
//   - row statistics: one invocation per row turns its BC scores into weights exp(s - m) against
//     the row's running max m (online softmax; alpha = exp(m_old - m) rescales what came before),
//     in place, one exp per (row, key);
//   - P.V: invocation t takes vec4 columns t % NC + NC * c and rows t / NC + NRG * m:
//     o = o * alpha + sum_j p_j v_j.
//   Three barriers a tile. At the end each row's (m, l) and unnormalised o go to its split's slot.
// Pass 2, decode_combine: NRG rows per workgroup, NC invocations per row over its vec4 columns:
//     M = max(max_s m_s, sink);  L = sum_s l_s exp(m_s - M) + exp(sink - M);
//     out = sum_s exp(m_s - M) o_s / L;  lse = M + log L.
// Exponentials are exp2 of differences times log2(e) (flash_fwd.blocked says why), each
// difference clamped at -1000 first so that no infinity is ever formed (exp(-1000) is 0 in f32).
// Every index is guarded in this code, given sizes wgattn.interfaces.paged_decode validated (block-table
// entries a sequence uses in range, u32 element indices): an invalid block reads as zeros, lengths
// are clamped to what the block table addresses, private-array loops stop at their capacity.
// F16: the cache and the staged K/V tiles are f16 (half the bytes); arithmetic is f32.
// Reference: wgattn.reference.decode_attention.
#include "interfaces/paged_decode.wgsl"
#include "lib/varlen.wgsl"
#include "lib/softcap.wgsl"

override WG: u32;    // invocations per workgroup
override BC: u32;    // keys per tile, WG % BC == 0
override RB: u32;    // rows (query head of the group, new token) per workgroup
override D4: u32;    // vec4 columns of a head row: ceil(head_dim / 4)
override QS: u32;    // vec4 stride of a staged q row: D4 rounded up to an odd number
override KS: u32;    // vec4 stride of a staged k/v row: max(D4, NC * CPT) rounded up to odd
override SRG: u32;   // row groups of the score phase: WG / BC
override SPT: u32;   // rows per invocation in the score phase: ceil(RB / SRG), at most MAX_SPT
override NC: u32;    // column lanes of the P.V phase and the combine (a power of two)
override NRG: u32;   // row groups of the P.V phase and rows per combine workgroup: WG / NC
override RPT: u32;   // rows per invocation in the P.V phase: ceil(RB / NRG), at most MAX_RPT
override CPT: u32;   // vec4 columns per invocation: ceil(D4 / NC), at most MAX_CPT
override PF: u32;    // vec4 of k (and of v) each invocation moves per tile: ceil(BC * D4 / WG)
override BS: u32;    // tokens per cache block: a constant, so that j / BS and j % BS compile to
                     // multiplies and shifts instead of a division in every load (one pipeline per
                     // block size, which a model fixes)
const MAX_SPT: u32 = 16u;
const MAX_RPT: u32 = 16u;
const MAX_CPT: u32 = 2u;
const MAX_PF: u32 = 16u;
const LOWEST: f32 = -3.4028234663852886e38;  // stands for -inf: "no score"
const LOG2E: f32 = 1.4426950408889634;

var<workgroup> q_tile: array<vec4<f32>, RB * QS>;  // the block's q rows, pre-scaled
var<workgroup> k_tile: array<vec4<T>, BC * KS>;    // the tile's k rows
var<workgroup> v_tile: array<vec4<T>, BC * KS>;    // the tile's v rows (columns past D4 stay 0)
var<workgroup> s_tile: array<f32, RB * BC>;        // [row][key]: scores, then weights
var<workgroup> m_row: array<f32, RB>;              // running max of each row
var<workgroup> l_row: array<f32, RB>;              // running sum of each row's weights
var<workgroup> alpha_row: array<f32, RB>;          // this tile's rescale of each row

// exp(d) for d <= 0, through exp2; d is clamped so that no infinity is formed.
fn exp_le0(d: f32) -> f32 {
  return exp2(max(d, -1000.0) * LOG2E);
}

// Vec4 column c of row `row` of a [*, D] tensor (row = token-major index), zeros past head_dim.
#if VEC4
fn load_q(row: u32, c: u32, dim: u32) -> vec4<f32> {
  return q[row * (dim / 4u) + c];
}
fn load_cache(from_v: bool, row: u32, c: u32, dim: u32) -> vec4<T> {
  if (from_v) {
    return v_cache[row * (dim / 4u) + c];
  }
  return k_cache[row * (dim / 4u) + c];
}
#else
fn load_q(row: u32, c: u32, dim: u32) -> vec4<f32> {
  var x = vec4<f32>(0.0);
  for (var e = 0u; e < 4u; e++) {
    if (c * 4u + e < dim) {
      x[e] = q[row * dim + c * 4u + e];
    }
  }
  return x;
}
fn load_cache(from_v: bool, row: u32, c: u32, dim: u32) -> vec4<T> {
  var x = vec4<T>(0.0);
  for (var e = 0u; e < 4u; e++) {
    if (c * 4u + e < dim) {
      if (from_v) {
        x[e] = v_cache[row * dim + c * 4u + e];
      } else {
        x[e] = k_cache[row * dim + c * 4u + e];
      }
    }
  }
  return x;
}
#endif

// This invocation's share of the tile of BC keys from t0 of sequence b, kv head g: vec4 number
// e = lid + WG * f of the tile is key t0 + e / D4, column e % D4. Keys at or past `end`, and keys
// whose block is out of range (refused before dispatch; guarded all the same), are zeros.
fn fetch_tile(from_v: bool, lid: u32, t0: u32, end: u32, b: u32, g: u32) -> array<vec4<T>, MAX_PF> {
  var r: array<vec4<T>, MAX_PF>;
  for (var f = 0u; f < min(PF, MAX_PF); f++) {
    let e = lid + WG * f;
    let j = t0 + e / D4;
    if (e < BC * D4 && j < end) {
      let blk = block_table[b * params.max_blocks + j / BS];
      if (blk >= 0 && u32(blk) < params.num_blocks) {
        r[f] = load_cache(from_v, (u32(blk) * BS + j % BS) * params.heads_kv + g, e % D4, params.head_dim);
      }
    }
  }
  return r;
}

@compute @workgroup_size(WG)
fn decode_split(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
  // Everything up to the tile loop depends only on the workgroup: returns here are uniform.
  let w = wid.x + wid.y * nwg.x;
  let hkv = params.heads_kv;
  let ns = params.num_splits;
  let nrb = params.row_blocks;
  if (w >= params.batch_size * hkv * ns * nrb) {
    return;  // the spare workgroups of a grid folded into two dimensions
  }
  let rb = w % nrb;
  let split = (w / nrb) % ns;
  let g = (w / (nrb * ns)) % hkv;
  let b = w / (nrb * ns * hkv);
  let sq = params.new_tokens;
  let hq = params.heads_q;
  let group = hq / hkv;
  let rows = sq * group;
  let row0 = min(rb * RB, rows);
  let nrows = min(RB, rows - row0);
  let dim = params.head_dim;
  // Tokens in the cache, at most what the block table addresses; fewer than Sq_new (an idle
  // slot holds 0) means nothing is visible.
  let n = min(u32(max(seq_lens[b], 0)), params.max_blocks * BS);
  let live = n >= sq && nrows > 0u;
  let wl = params.window_left;
  // Keys any row of the block sees, [lo, hi): the first row's window start to the last row's key.
  var lo = 0u;
  var hi = 0u;
  if (live) {
    let pos_first = n - sq + row0 / group;
    hi = n - sq + (row0 + nrows - 1u) / group + 1u;
    if (wl >= 0) {
      lo = pos_first - min(pos_first, u32(wl));
    }
  }
  // This split's share of [lo, hi): whole tiles, the last split's share shorter (or empty).
  let chunk = ((hi - lo + ns - 1u) / ns + BC - 1u) / BC * BC;
  let start = min(lo + split * chunk, hi);
  let end = min(start + chunk, hi);

  // Stage the block's q rows, pre-scaled (softcap, when on, applies to the scaled score).
  for (var e = lid; e < RB * QS; e += WG) {
    let r = e / QS;
    let c = e % QS;
    var x = vec4<f32>(0.0);
    if (live && r < nrows && c < D4) {
      let rr = row0 + r;
      x = load_q((b * sq + rr / group) * hq + g * group + rr % group, c, dim) * params.scale;
    }
    q_tile[e] = x;
  }
  for (var r = lid; r < RB; r += WG) {
    m_row[r] = LOWEST;
    l_row[r] = 0.0;
  }

  // The score phase's rows: their visible keys [row_lo, row_hi) (empty for rows past the
  // block's), position and ALiBi slope.
  let kj = lid % BC;
  let rs = lid / BC;
  var row_lo: array<u32, MAX_SPT>;
  var row_hi: array<u32, MAX_SPT>;
  var row_pos: array<i32, MAX_SPT>;
  var row_slope: array<f32, MAX_SPT>;
  for (var m = 0u; m < min(SPT, MAX_SPT); m++) {
    let r = rs + SRG * m;
    if (live && r < nrows) {
      let rr = row0 + r;
      let pos = n - sq + rr / group;
      row_hi[m] = pos + 1u;
      if (wl >= 0) {
        row_lo[m] = pos - min(pos, u32(wl));
      }
      row_pos[m] = i32(pos);
      row_slope[m] = alibi_slopes[g * group + rr % group];
    }
  }

  var k_next = fetch_tile(false, lid, start, end, b, g);
  var v_next = fetch_tile(true, lid, start, end, b, g);
  for (var f = 0u; f < min(PF, MAX_PF); f++) {
    let e = lid + WG * f;
    if (e < BC * D4) {
      k_tile[(e / D4) * KS + e % D4] = k_next[f];
      v_tile[(e / D4) * KS + e % D4] = v_next[f];
    }
  }
  k_next = fetch_tile(false, lid, start + BC, end, b, g);
  v_next = fetch_tile(true, lid, start + BC, end, b, g);
  workgroupBarrier();  // q, the row state and the first tile are staged

  let cap = params.softcap;
  let cl = lid % NC;
  let rg = lid / NC;
  var o: array<array<vec4<f32>, MAX_CPT>, MAX_RPT>;
  // Per tile: scores (k_tile) | barrier | next k stored, row statistics | barrier | P.V (v_tile)
  // | barrier | next v stored, the tile after next fetched. Each store lands a barrier before its read.
  for (var t0 = start; t0 < end; t0 += BC) {
    // Zeroed here, not by the declaration: naga initialises a loop's locals once, not per pass.
    var s: array<f32, MAX_SPT>;
    for (var m = 0u; m < min(SPT, MAX_SPT); m++) {
      s[m] = 0.0;
    }
    for (var c = 0u; c < D4; c++) {
      let kk = vec4<f32>(k_tile[kj * KS + c]);
      for (var m = 0u; m < min(SPT, MAX_SPT); m++) {
        s[m] += dot(q_tile[min(rs + SRG * m, RB - 1u) * QS + c], kk);
      }
    }
    let j = t0 + kj;
    for (var m = 0u; m < min(SPT, MAX_SPT); m++) {
      let r = rs + SRG * m;
      if (r < RB) {
        var x = s[m];
        if (cap > 0.0) {
          x = softcap_apply(x, cap);
        }
        x += row_slope[m] * f32(i32(j) - row_pos[m]);
        let seen = j >= row_lo[m] && j < row_hi[m] && j < end;
        s_tile[r * BC + kj] = select(LOWEST, x, seen);
      }
    }
    workgroupBarrier();  // the scores are written; k_tile is no longer read

    for (var f = 0u; f < min(PF, MAX_PF); f++) {
      let e = lid + WG * f;
      if (e < BC * D4) {
        k_tile[(e / D4) * KS + e % D4] = k_next[f];
      }
    }
    for (var r = lid; r < RB; r += WG) {
      let m_old = m_row[r];
      var top = m_old;
      for (var jj = 0u; jj < BC; jj++) {
        top = max(top, s_tile[r * BC + jj]);
      }
      // A row with nothing seen yet keeps top = LOWEST: its weights are 0, and alpha scales zeros.
      let alpha = select(0.0, exp_le0(m_old - top), m_old > LOWEST);
      var sum = 0.0;
      for (var jj = 0u; jj < BC; jj++) {
        let x = s_tile[r * BC + jj];
        let p = select(0.0, exp_le0(x - top), x > LOWEST);
        s_tile[r * BC + jj] = p;
        sum += p;
      }
      m_row[r] = top;
      l_row[r] = l_row[r] * alpha + sum;
      alpha_row[r] = alpha;
    }
    workgroupBarrier();  // the weights and alphas are staged

    for (var mm = 0u; mm < min(RPT, MAX_RPT); mm++) {
      let r = rg + NRG * mm;
      if (r < RB) {
        let a = alpha_row[r];
        for (var i = 0u; i < min(CPT, MAX_CPT); i++) {
          o[mm][i] *= a;
        }
      }
    }
    for (var jj = 0u; jj < BC; jj++) {
      var vv: array<vec4<f32>, MAX_CPT>;
      for (var i = 0u; i < min(CPT, MAX_CPT); i++) {
        vv[i] = vec4<f32>(v_tile[jj * KS + min(cl + NC * i, KS - 1u)]);
      }
      for (var mm = 0u; mm < min(RPT, MAX_RPT); mm++) {
        let r = rg + NRG * mm;
        if (r < RB) {
          let p = s_tile[r * BC + jj];
          for (var i = 0u; i < min(CPT, MAX_CPT); i++) {
            o[mm][i] += p * vv[i];
          }
        }
      }
    }
    workgroupBarrier();  // v_tile and the weights are no longer read
    for (var f = 0u; f < min(PF, MAX_PF); f++) {
      let e = lid + WG * f;
      if (e < BC * D4) {
        v_tile[(e / D4) * KS + e % D4] = v_next[f];
      }
    }
    k_next = fetch_tile(false, lid, t0 + 2u * BC, end, b, g);
    v_next = fetch_tile(true, lid, t0 + 2u * BC, end, b, g);
  }

  // This split's partial state of each row (an empty split, or an idle slot: m = LOWEST, l = 0,
  // o = 0). The invocation that kept a row's (m, l) writes them.
  for (var mm = 0u; mm < min(RPT, MAX_RPT); mm++) {
    let r = rg + NRG * mm;
    if (r < nrows) {
      let rr = row0 + r;
      let gr = (b * sq + rr / group) * hq + g * group + rr % group;
      for (var i = 0u; i < min(CPT, MAX_CPT); i++) {
        let col = cl + NC * i;
        if (col < D4) {
          part_o[(gr * ns + split) * D4 + col] = o[mm][i];
        }
      }
    }
  }
  for (var r = lid; r < nrows; r += WG) {
    let rr = row0 + r;
    let gr = (b * sq + rr / group) * hq + g * group + rr % group;
    part_ml[gr * ns + split] = vec2<f32>(m_row[r], l_row[r]);
  }
}

@compute @workgroup_size(WG)
fn decode_combine(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
  let w = wid.x + wid.y * nwg.x;
  let cl = lid % NC;
  let gr = w * NRG + lid / NC;
  if (gr >= params.batch_size * params.new_tokens * params.heads_q) {
    return;  // no barrier follows: a per-invocation return is fine
  }
  let ns = params.num_splits;
  let sinks_on = params.sinks_on != 0u;
  var top = LOWEST;
  for (var s = 0u; s < ns; s++) {
    top = max(top, part_ml[gr * ns + s].x);
  }
  var sink = 0.0;
  if (sinks_on) {
    sink = sinks[gr % params.heads_q];
    top = max(top, sink);
  }
  var z = 0.0;
  for (var s = 0u; s < ns; s++) {
    let ml = part_ml[gr * ns + s];
    z += select(0.0, ml.y * exp_le0(ml.x - top), ml.x > LOWEST);
  }
  if (sinks_on) {
    z += exp_le0(sink - top);
  }
  // Nothing seen and no sink: out 0, lse -inf. Otherwise z >= 1 (the term at the max is 1).
  let seen = z > 0.0;
  let inv = select(0.0, 1.0 / z, seen);
  for (var i = 0u; i < min(CPT, MAX_CPT); i++) {
    let col = cl + NC * i;
    if (col < D4) {
      var acc = vec4<f32>(0.0);
      for (var s = 0u; s < ns; s++) {
        let ml = part_ml[gr * ns + s];
        if (ml.x > LOWEST) {
          acc += exp_le0(ml.x - top) * part_o[(gr * ns + s) * D4 + col];
        }
      }
      let x = acc * inv;
#if VEC4
      out[gr * D4 + col] = x;
#else
      for (var e = 0u; e < 4u; e++) {
        let d = col * 4u + e;
        if (d < params.head_dim) {
          out[gr * params.head_dim + d] = x[e];
        }
      }
#endif
    }
  }
  if (cl == 0u) {
    lse[gr] = select(neg_inf(), top + log(z), seen);
  }
}
