// varlen_bwd.smx: FlashAttention-2 backward on subgroup matrices (tensor cores where the adapter
// has them): the four products of each tile are f16 x f16 -> f32 matrix products, P and dS are
// formed in f32 and rounded to f16 for the two products that take them (as FlashAttention does).
// wgattn's varlen_bwd contract: packed varlen, GQA, (left, right) windows in both alignments,
// softcap; deterministic (every output element is written by one invocation, no atomics).
//
//   Per sequence b, query row i (head h), key j (kv head g = h / (heads_q / heads_kv)):
//     s0_ij = scale * q_i . k_j;  s_ij = softcap * tanh(s0_ij / softcap) if softcap > 0 else s0_ij
//     P_ij  = exp(s_ij - lse_i) on visible (i, j); a row with a non-finite lse contributes nothing
//     delta_i = dout_i . out_i;  dP_ij = dout_i . v_j
//     dS_ij = P_ij (dP_ij - delta_i) (1 - tanh^2: only with softcap, softcap_slope)
//     dv_j = sum_{h in group(g)} sum_i P_ij dout_i;  dk_j = scale sum_{h in group(g)} sum_i dS_ij q_i
//     dq_i = scale sum_j dS_ij k_j
//   Visible: with offset = len_k - len_q (bottom-right) or 0 (top-left),
//     (window_left < 0 or j >= i + offset - window_left) and (window_right < 0 or j <= i + offset + window_right);
//   causal is folded in by the host (window_right = 0). Rows with no visible key get dq = 0; keys
//   no row sees get dk = dv = 0.
//
// Layout (token-major, f32): q, out, dout, dq [total_q, heads_q, D]; k, v [total_k, heads_kv, D];
// dkv [2, total_k, heads_kv, D]; stats [2, total_q, heads_q]: lse (the host's), then delta. The
// inputs are rounded to f16 as they are staged (the kernel is judged by the f16 rule).
//
// One matrix shape, S x S x S (the plan refuses a configuration with M, N, K not all equal: every
// staged tile then serves as a left, a right and a transposed right operand). Passes:
//   bwd_preprocess  delta = dout . out, one invocation per (query token, head).
//   bwd_dkdv        a workgroup per (block of BF = RB * S keys, sequence, kv head): its K and V
//                   rows are left fragments in registers for the whole pass; for each query head
//                   of the group and each tile of BT query rows that any key of the block sees:
//                   stage Q and dout (f16), lse and delta | Sᵀ = K Qᵀ, dPᵀ = V doutᵀ to
//                   workgroup memory | Pᵀ and dSᵀ elementwise by every invocation, to f16 | dV +=
//                   Pᵀ dout, dK += dSᵀ Q. Four barriers a tile.
//   bwd_dq          a workgroup per (block of BF query rows, sequence, query head): Q and dout in
//                   registers; per tile of BT keys of the block's band: stage K and V | S = Q Kᵀ,
//                   dP = dout Vᵀ | dS | dQ += dS K.
// Row block f of a workgroup has DS subgroups (f * DS + part): each holds the block's two operand
// fragments in registers, computes the tile's result fragments n with n % DS == part and keeps
// the accumulators of 1/DS of the head-dim chunks (DS = 2 halves the registers they take, as in
// flash_fwd.smx's forward). Tiles: 8 row blocks of 16 rows against tiles of 16, measured fastest
// on the H100 in Chromium at D = 64 and 128 (fewer, larger row blocks were slower; the history
// holds the figures).
// Register arrays are indexed only by counters of loops with constant bounds (NVIDIA's compiler
// puts an array with any other index in local memory: flash_fwd.smx says what that cost), and
// stay in the entry point that declares them: the two passes write their matrix loops out each
// rather than hand the arrays to a shared function.
// Robustness: as flash_fwd.smx, every operand in workgroup memory is an array of fragments, each
// matrix load or store takes `&arr[i]`, offset 0 and a constant stride; every workgroup variable
// is a multiple of 16 bytes (NVIDIA's driver reads a fragment from its address rounded down to
// 16 bytes). Dawn zero-fills workgroup memory and wgpu does not: everything read is written first.
// Reference: wgattn.reference.varlen_attention_bwd.
#include "lib/subgroup_matrix.wgsl"

#include "interfaces/varlen_bwd.wgsl"
#include "lib/varlen.wgsl"
#include "lib/softcap.wgsl"

#if SMX_M16
const S: u32 = 16u;  // the fragments' side
#else
const S: u32 = 8u;
#endif
const P4: u32 = (S + 8u) / 4u;  // vec4<f16> stride of a fragment row, padded 16 bytes (banks)
const F4: u32 = (S + 4u) / 4u;  // vec4<f32> stride of a result fragment row
// MAX_DC: head-dim chunks of S columns (DP / S); DS: subgroups per row block (a tile knob).
#const MAX_DC
#const DS
const DCS: u32 = MAX_DC / DS;  // head-dim chunks of the accumulators a subgroup keeps
const LOG2E: f32 = 1.4426950408889634;
const EMPTY_LSE: f32 = 1.0e30;  // stands for a non-finite lse: exp(s - EMPTY_LSE) is 0

alias LF = subgroup_matrix_left<f16, S, S>;
alias RF = subgroup_matrix_right<f16, S, S>;
alias AF = subgroup_matrix_result<f32, S, S>;

override WG: u32;   // invocations per workgroup: RB * DS subgroups
override RB: u32;   // row blocks of S fixed rows (keys in bwd_dkdv, query rows in bwd_dq)
override BT: u32;   // rows of a tile (query rows in bwd_dkdv, keys in bwd_dq): a multiple of S
override DP: u32;   // head_dim rounded up to a multiple of 16 (zeros past head_dim)
override BF: u32 = RB * S;  // fixed rows per workgroup
override NT: u32 = BT / S;  // fragments along a tile
override DC: u32 = DP / S;  // fragments along the head dim

// Tiles: [row fragment * DC + head-dim chunk][row * P4 + vec4 column], rows of the tile row-major.
var<workgroup> ta: array<array<vec4<f16>, S * P4>, NT * DC>;  // Q (bwd_dkdv) or K (bwd_dq)
var<workgroup> tb: array<array<vec4<f16>, S * P4>, NT * DC>;  // dout (bwd_dkdv) or V (bwd_dq)
// Results: [row block * NT + tile fragment], fixed rows x tile rows; ra also carries the
// accumulators to the output at the end.
var<workgroup> ra: array<array<vec4<f32>, S * F4>, RB * NT>;  // Sᵀ (bwd_dkdv) or S (bwd_dq)
var<workgroup> rb: array<array<vec4<f32>, S * F4>, RB * NT>;  // dPᵀ or dP
var<workgroup> pa: array<array<vec4<f16>, S * P4>, RB * NT>;  // Pᵀ (bwd_dkdv)
var<workgroup> pb: array<array<vec4<f16>, S * P4>, RB * NT>;  // dSᵀ or dS, times scale
var<workgroup> lse_t: array<vec4<f32>, max(BT, BF) / 4u>;   // lse of the rows whose P is formed
var<workgroup> delta_t: array<vec4<f32>, max(BT, BF) / 4u>; // and their delta

// Columns d .. d+3 of token-major row `row` (token * heads + head) of q (0), k (1), v (2) or
// dout (3), zeros past head_dim.
fn load4(which: u32, row: u32, d: u32, dim: u32) -> vec4<f32> {
  var x = vec4<f32>(0.0);
  for (var e = 0u; e < 4u; e++) {
    if (d + e < dim) {
      let at = row * dim + d + e;
      switch which {
        case 0u: { x[e] = q[at]; }
        case 1u: { x[e] = k[at]; }
        case 2u: { x[e] = v[at]; }
        default: { x[e] = dout[at]; }
      }
    }
  }
  return x;
}

// Rows first .. first + BT - 1 of head `head` (of `heads`) of tensor `which`, f16, into a tile
// (zeros from row `valid` on): a tile of ta when into_a, else of tb.
fn stage(which: u32, into_a: bool, first: u32, valid: u32, head: u32, heads: u32, dim: u32, lid: u32) {
  for (var e = lid; e < BT * DP / 4u; e += WG) {
    let r = e / (DP / 4u);
    let d = (e % (DP / 4u)) * 4u;
    var x = vec4<f32>(0.0);
    if (r < valid) {
      x = load4(which, (first + r) * heads + head, d, dim);
    }
    let f = (r / S) * DC + d / S;
    let at = (r % S) * P4 + (d % S) / 4u;
    if (into_a) {
      ta[f][at] = vec4<f16>(x);
    } else {
      tb[f][at] = vec4<f16>(x);
    }
  }
}

// lse and delta of query rows q0 .. q0 + n - 1 (head h) into lse_t, delta_t (EMPTY_LSE for a
// non-finite lse and past the rows).
fn stage_stats(q0: u32, n: u32, h: u32, lid: u32) {
  let hq = params.heads_q;
  let tq = params.total_q;
  for (var e = lid; e < max(BT, BF) / 4u; e += WG) {
    var l = vec4<f32>(EMPTY_LSE);
    var dl = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c++) {
      let r = e * 4u + c;
      if (r < n) {
        let x = stats[(q0 + r) * hq + h];
        l[c] = select(EMPTY_LSE, x, abs(x) < 3.0e38);  // -inf (an empty row) and NaN: nothing
        dl[c] = stats[tq * hq + (q0 + r) * hq + h];
      }
    }
    lse_t[e] = l;
    delta_t[e] = dl;
  }
}

// (P, dS * scale) of one visible (query, key) pair from its raw dot products.
fn grad(s0: f32, dp: f32, lse: f32, delta: f32, scale: f32, cap: f32) -> vec2<f32> {
  let x = s0 * scale;
  var s = x;
  var slope = 1.0;
  if (cap > 0.0) {
    s = softcap_apply(x, cap);
    slope = softcap_slope(x, cap);
  }
  let p = exp2((s - lse) * LOG2E);
  return vec2<f32>(p, p * (dp - delta) * slope * scale);
}

// Whether query row i sees key j (both within their sequence).
fn visible(i: i32, j: i32, len_q: i32, len_k: i32, offset: i32, wl: i32, wr: i32) -> bool {
  return i >= 0 && i < len_q && j >= 0 && j < len_k && (wl < 0 || j >= i + offset - wl) && (wr < 0 || j <= i + offset + wr);
}

// P (or Pᵀ) and dS of the tile, elementwise by every invocation: result element (fixed row fr,
// tile row tr) of ra/rb; the query row and key it stands for are given by `fixed_is_key`.
// Writes pa (when with_p) and pb.
fn tile_grads(fixed0: i32, tile0: i32, fixed_is_key: bool, with_p: bool, len_q: i32, len_k: i32, offset: i32,
              wl: i32, wr: i32, lid: u32) {
  let scale = params.scale;
  let cap = params.softcap;
  for (var e = lid; e < BF * BT / 4u; e += WG) {
    let fr = e / (BT / 4u);
    let tr = (e % (BT / 4u)) * 4u;
    let f = (fr / S) * NT + tr / S;
    let a32 = (fr % S) * F4 + (tr % S) / 4u;
    let s0 = ra[f][a32];
    let dp = rb[f][a32];
    var p = vec4<f32>(0.0);
    var ds = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c++) {
      var i = fixed0 + i32(fr);  // query row and key of this element
      var j = tile0 + i32(tr + c);
      var lse = lse_t[fr / 4u][fr % 4u];
      var delta = delta_t[fr / 4u][fr % 4u];
      if (fixed_is_key) {
        i = tile0 + i32(tr + c);
        j = fixed0 + i32(fr);
        lse = lse_t[(tr + c) / 4u][(tr + c) % 4u];
        delta = delta_t[(tr + c) / 4u][(tr + c) % 4u];
      }
      if (visible(i, j, len_q, len_k, offset, wl, wr)) {
        let g = grad(s0[c], dp[c], lse, delta, scale, cap);
        p[c] = g.x;
        ds[c] = g.y;
      }
    }
    let a16 = (fr % S) * P4 + (tr % S) / 4u;
    if (with_p) {
      pa[f][a16] = vec4<f16>(p);
    }
    pb[f][a16] = vec4<f16>(ds);
  }
}

@compute @workgroup_size(64)
fn bwd_preprocess(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let e = gid.x + gid.y * nwg.x * 64u;
  let rows = params.total_q * params.heads_q;
  if (e >= rows) {
    return;
  }
  let dim = params.head_dim;
  var acc = vec4<f32>(0.0);  // four partial sums
  var d = 0u;
  for (; d + 4u <= dim; d += 4u) {
    let o = vec4<f32>(out[e * dim + d], out[e * dim + d + 1u], out[e * dim + d + 2u], out[e * dim + d + 3u]);
    let g = vec4<f32>(dout[e * dim + d], dout[e * dim + d + 1u], dout[e * dim + d + 2u], dout[e * dim + d + 3u]);
    acc += o * g;
  }
  for (; d < dim; d++) {
    acc.x += out[e * dim + d] * dout[e * dim + d];
  }
  stats[rows + e] = (acc.x + acc.y) + (acc.z + acc.w);
}

@compute @workgroup_size(WG)
fn bwd_dkdv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32, @builtin(subgroup_size) sg_size: u32) {
  // Everything up to the tile loops depends only on the workgroup: returns here are uniform.
  let w = wid.x + wid.y * nwg.x;
  let hkv = params.heads_kv;
  let nb = params.batch_size;
  if (nb == 0u) {
    return;
  }
  let g = w % hkv;
  let b = (w / hkv) % nb;
  let blk = w / (hkv * nb);
  let q_start = cu_seqlens_q[b];
  let len_q = cu_seqlens_q[b + 1u] - q_start;
  let k_start = cu_seqlens_k[b];
  let len_k = cu_seqlens_k[b + 1u] - k_start;
  let j0 = i32(blk * BF);
  if (j0 >= len_k) {
    return;
  }
  let j_last = min(j0 + i32(BF), len_k) - 1;
  let dim = params.head_dim;
  let hq = params.heads_q;
  let grp = hq / hkv;
  let offset = diagonal_offset(len_q, len_k, params.align_top_left);
  let wl = params.window_left;
  let wr = params.window_right;
  var qlo = 0;  // the query rows any key of the block sees: [qlo, qhi)
  var qhi = len_q;
  if (wr >= 0) {
    qlo = max(qlo, j0 - offset - wr);
  }
  if (wl >= 0) {
    qhi = min(qhi, j_last - offset + wl + 1);
  }
  let sg = lid / sg_size;
  let fb = sg / DS;  // this subgroup's row block, and its part of the block's work
  let part = sg % DS;
  let mx = sg < RB * DS;  // has matrix work

  // K and V of the block, left fragments (keys x dims), through ta and tb in chunks of BT keys.
  var kr: array<LF, MAX_DC>;
  var vr: array<LF, MAX_DC>;
  for (var ch = 0u; ch < (RB + NT - 1u) / NT; ch++) {
    let first = j0 + i32(ch * BT);
    let valid = u32(max(0, min(i32(BT), len_k - first)));
    stage(1u, true, u32(k_start + first), valid, g, hkv, dim, lid);
    stage(2u, false, u32(k_start + first), valid, g, hkv, dim, lid);
    workgroupBarrier();
    if (mx && fb / NT == ch) {
      for (var c = 0u; c < MAX_DC; c++) {
        kr[c] = subgroupMatrixLoad<LF, row_major>(&ta[(fb % NT) * DC + c], 0u, P4);
        vr[c] = subgroupMatrixLoad<LF, row_major>(&tb[(fb % NT) * DC + c], 0u, P4);
      }
    }
    workgroupBarrier();
  }

  var dk: array<AF, DCS>;  // head-dim chunks part * DCS .. of the block's dk and dv
  var dv: array<AF, DCS>;
  for (var c = 0u; c < DCS; c++) {
    dk[c] = AF();
    dv[c] = AF();
  }
  for (var gh = 0u; gh < grp; gh++) {
    let h = g * grp + gh;
    for (var t0 = qlo; t0 < qhi; t0 += i32(BT)) {
      let valid = u32(min(i32(BT), len_q - t0));
      stage(0u, true, u32(q_start + t0), valid, h, hq, dim, lid);
      stage(3u, false, u32(q_start + t0), valid, h, hq, dim, lid);
      stage_stats(u32(q_start + t0), valid, h, lid);
      workgroupBarrier();
      // Sᵀ = K Qᵀ and dPᵀ = V doutᵀ: keys x query rows.
      if (mx) {
        for (var n = part; n < NT; n += DS) {
          var s = AF();
          var dp = AF();
          for (var c = 0u; c < MAX_DC; c++) {
            s = subgroupMatrixMultiplyAccumulate(kr[c], subgroupMatrixLoad<RF, col_major>(&ta[n * DC + c], 0u, P4), s);
            dp = subgroupMatrixMultiplyAccumulate(vr[c], subgroupMatrixLoad<RF, col_major>(&tb[n * DC + c], 0u, P4), dp);
          }
          subgroupMatrixStore<row_major>(&ra[fb * NT + n], 0u, s, F4);
          subgroupMatrixStore<row_major>(&rb[fb * NT + n], 0u, dp, F4);
        }
      }
      workgroupBarrier();
      tile_grads(j0, t0, true, true, len_q, len_k, offset, wl, wr, lid);
      workgroupBarrier();
      // dV += Pᵀ dout, dK += dSᵀ Q over this subgroup's head-dim chunks.
      if (mx) {
        for (var kk = 0u; kk < NT; kk++) {
          let p = subgroupMatrixLoad<LF, row_major>(&pa[fb * NT + kk], 0u, P4);
          let ds = subgroupMatrixLoad<LF, row_major>(&pb[fb * NT + kk], 0u, P4);
          for (var cl = 0u; cl < DCS; cl++) {
            let c = part * DCS + cl;
            dv[cl] = subgroupMatrixMultiplyAccumulate(p, subgroupMatrixLoad<RF, row_major>(&tb[kk * DC + c], 0u, P4), dv[cl]);
            dk[cl] = subgroupMatrixMultiplyAccumulate(ds, subgroupMatrixLoad<RF, row_major>(&ta[kk * DC + c], 0u, P4), dk[cl]);
          }
        }
      }
      workgroupBarrier();
    }
  }

  // dk, then dv, through ra in chunks of NT head-dim fragments.
  let tk = params.total_k;
  for (var which = 0u; which < 2u; which++) {
    for (var ch = 0u; ch < (DC + NT - 1u) / NT; ch++) {
      if (mx) {
        for (var cl = 0u; cl < DCS; cl++) {  // a constant index into dk, dv
          let c = part * DCS + cl;
          if (c / NT == ch) {
            if (which == 0u) {
              subgroupMatrixStore<row_major>(&ra[fb * NT + c % NT], 0u, dk[cl], F4);
            } else {
              subgroupMatrixStore<row_major>(&ra[fb * NT + c % NT], 0u, dv[cl], F4);
            }
          }
        }
      }
      workgroupBarrier();
      for (var e = lid; e < BF * BT / 4u; e += WG) {
        let jj = e / (BT / 4u);
        let col = (e % (BT / 4u)) * 4u;
        let d = ch * BT + col;
        if (j0 + i32(jj) <= j_last && d < dim) {
          let y = ra[(jj / S) * NT + col / S][(jj % S) * F4 + (col % S) / 4u];
          let row = which * tk * hkv + u32(k_start + j0 + i32(jj)) * hkv + g;
          for (var c = 0u; c < 4u; c++) {
            if (d + c < dim) {
              dkv[row * dim + d + c] = y[c];
            }
          }
        }
      }
      workgroupBarrier();
    }
  }
}

@compute @workgroup_size(WG)
fn bwd_dq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32, @builtin(subgroup_size) sg_size: u32) {
  let w = wid.x + wid.y * nwg.x;
  let hq = params.heads_q;
  let nb = params.batch_size;
  if (nb == 0u) {
    return;
  }
  let h = w % hq;
  let b = (w / hq) % nb;
  let blk = w / (hq * nb);
  let q_start = cu_seqlens_q[b];
  let len_q = cu_seqlens_q[b + 1u] - q_start;
  let k_start = cu_seqlens_k[b];
  let len_k = cu_seqlens_k[b + 1u] - k_start;
  let row0 = i32(blk * BF);
  if (row0 >= len_q) {
    return;
  }
  let row_last = min(row0 + i32(BF), len_q) - 1;
  let dim = params.head_dim;
  let hkv = params.heads_kv;
  let kvh = h / (hq / hkv);
  let offset = diagonal_offset(len_q, len_k, params.align_top_left);
  let wl = params.window_left;
  let wr = params.window_right;
  let band = visible_keys(row0, row_last, offset, len_k, wl, wr);
  let sg = lid / sg_size;
  let fb = sg / DS;
  let part = sg % DS;
  let mx = sg < RB * DS;

  // Q and dout of the block, left fragments (rows x dims), through ta and tb; lse and delta.
  var qr: array<LF, MAX_DC>;
  var dr: array<LF, MAX_DC>;
  for (var ch = 0u; ch < (RB + NT - 1u) / NT; ch++) {
    let first = row0 + i32(ch * BT);
    let valid = u32(max(0, min(i32(BT), len_q - first)));
    stage(0u, true, u32(q_start + first), valid, h, hq, dim, lid);
    stage(3u, false, u32(q_start + first), valid, h, hq, dim, lid);
    workgroupBarrier();
    if (mx && fb / NT == ch) {
      for (var c = 0u; c < MAX_DC; c++) {
        qr[c] = subgroupMatrixLoad<LF, row_major>(&ta[(fb % NT) * DC + c], 0u, P4);
        dr[c] = subgroupMatrixLoad<LF, row_major>(&tb[(fb % NT) * DC + c], 0u, P4);
      }
    }
    workgroupBarrier();
  }
  stage_stats(u32(q_start + row0), u32(row_last - row0 + 1), h, lid);

  var dq_acc: array<AF, DCS>;
  for (var c = 0u; c < DCS; c++) {
    dq_acc[c] = AF();
  }
  for (var t0 = band.x; t0 < band.y; t0 += i32(BT)) {
    let valid = u32(min(i32(BT), len_k - t0));
    stage(1u, true, u32(k_start + t0), valid, kvh, hkv, dim, lid);
    stage(2u, false, u32(k_start + t0), valid, kvh, hkv, dim, lid);
    workgroupBarrier();
    // S = Q Kᵀ and dP = dout Vᵀ: query rows x keys.
    if (mx) {
      for (var n = part; n < NT; n += DS) {
        var s = AF();
        var dp = AF();
        for (var c = 0u; c < MAX_DC; c++) {
          s = subgroupMatrixMultiplyAccumulate(qr[c], subgroupMatrixLoad<RF, col_major>(&ta[n * DC + c], 0u, P4), s);
          dp = subgroupMatrixMultiplyAccumulate(dr[c], subgroupMatrixLoad<RF, col_major>(&tb[n * DC + c], 0u, P4), dp);
        }
        subgroupMatrixStore<row_major>(&ra[fb * NT + n], 0u, s, F4);
        subgroupMatrixStore<row_major>(&rb[fb * NT + n], 0u, dp, F4);
      }
    }
    workgroupBarrier();
    tile_grads(row0, t0, false, false, len_q, len_k, offset, wl, wr, lid);
    workgroupBarrier();
    // dQ += dS K over this subgroup's head-dim chunks.
    if (mx) {
      for (var kk = 0u; kk < NT; kk++) {
        let ds = subgroupMatrixLoad<LF, row_major>(&pb[fb * NT + kk], 0u, P4);
        for (var cl = 0u; cl < DCS; cl++) {
          let c = part * DCS + cl;
          dq_acc[cl] = subgroupMatrixMultiplyAccumulate(ds, subgroupMatrixLoad<RF, row_major>(&ta[kk * DC + c], 0u, P4), dq_acc[cl]);
        }
      }
    }
    workgroupBarrier();
  }

  // dq through ra in chunks of NT head-dim fragments.
  for (var ch = 0u; ch < (DC + NT - 1u) / NT; ch++) {
    if (mx) {
      for (var cl = 0u; cl < DCS; cl++) {  // a constant index into dq_acc
        let c = part * DCS + cl;
        if (c / NT == ch) {
          subgroupMatrixStore<row_major>(&ra[fb * NT + c % NT], 0u, dq_acc[cl], F4);
        }
      }
    }
    workgroupBarrier();
    for (var e = lid; e < BF * BT / 4u; e += WG) {
      let ii = e / (BT / 4u);
      let col = (e % (BT / 4u)) * 4u;
      let d = ch * BT + col;
      if (row0 + i32(ii) <= row_last && d < dim) {
        let y = ra[(ii / S) * NT + col / S][(ii % S) * F4 + (col % S) / 4u];
        let row = u32(q_start + row0 + i32(ii)) * hq + h;
        for (var c = 0u; c < 4u; c++) {
          if (d + c < dim) {
            dq[row * dim + d + c] = y[c];
          }
        }
      }
    }
    workgroupBarrier();
  }
}
