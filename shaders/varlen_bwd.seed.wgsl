// varlen_bwd.seed: backward of packed variable-length attention (FlashAttention-2 formulas),
// wgattn's contract: GQA, (left, right) windows in both alignments, softcap, ALiBi, attention
// sinks, deterministic.
//
//   Per sequence b, query row i (head h), key j (kv head g = h / (heads_q / heads_kv)):
//     s0_ij = scale * q_i . k_j;  s_ij = softcap * tanh(s0_ij / softcap) if softcap > 0 else s0_ij
//     s_ij -= slope_h * |j - (i + offset)|  (alibi_on; slope_h = stats[2 * total_q * heads_q + h])
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
// Grid, three passes of this kernel, each one invocation per row, WG rows per workgroup, the
// workgroup count folded into x and y past 65535 (then the interface's bwd_dsinks):
//   bwd_preprocess  (query token, query head): delta
//   bwd_dkdv        (key token, kv head): dk, dv over the query heads of its group and the queries
//                   that can see the key (a range computed from the window, not a scan)
//   bwd_dq          (query token, query head): dq over the keys it sees
// No atomics: every output element is written by exactly one invocation, so runs are bit-identical.
// Any head_dim: each output row is built CHUNK columns at a time in a private accumulator; the
// scores (and dP) are recomputed for each chunk. Long sums (dv of an early causal key sums P dout
// over every query of its group: thousands of terms) are taken in two levels, SUM_BLOCK terms into
// a partial sum, partial sums into the total, which keeps the float32 rounding error near that of
// a blocked matrix product instead of growing with the sequence length.
// Reference: wgattn.reference.varlen_attention_bwd, keywords mapped in wgattn/interfaces/varlen_bwd.py.
// Baseline by design (one thread per row, no reuse between threads); tiled kernels are separate.

override WG: u32;            // invocations (rows) per workgroup
const CHUNK: u32 = 64u;      // output columns one sweep accumulates (any head_dim works)
const SUM_BLOCK: i32 = 32;   // terms summed into a partial sum before it joins the total
const LOG2E: f32 = 1.4426950408889634;

#include "lib/varlen.wgsl"
#include "lib/softcap.wgsl"

#include "interfaces/varlen_bwd.wgsl"
#include "lib/varlen_tokens.wgsl"

// One (token, head) row per invocation, the workgroup grid unfolded from (x, y).
fn row_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
  return (wid.y * nwg.x + wid.x) * WG + lid;
}

// Score terms of one (query row, key): the probability P (0 when the row's lse is not finite) and
// the factor turning dP - delta into dS (P, times 1 - tanh^2 under softcap).
struct Score {
  p: f32,
  ds_factor: f32,
}

// `bias`: the ALiBi term of (i, j), added after softcap (0 without ALiBi).
fn score(q_base: u32, k_base: u32, lse: f32, bias: f32) -> Score {
  var dot: f32 = 0.0;
  for (var d: u32 = 0u; d < params.head_dim; d++) {
    dot += q[q_base + d] * k[k_base + d];
  }
  var s = dot * params.scale;
  var dfac: f32 = 1.0;
  if (params.softcap > 0.0) {
    dfac = softcap_slope(s, params.softcap);  // from the uncapped score
    s = softcap_apply(s, params.softcap);
  }
  if (params.alibi_on != 0u) {
    s += bias;
  }
  let p = exp2((s - lse) * LOG2E);
  return Score(p, p * dfac);
}

fn dot_dout_v(o_base: u32, v_base: u32) -> f32 {
  var acc: f32 = 0.0;
  for (var d: u32 = 0u; d < params.head_dim; d++) {
    acc += dout[o_base + d] * v[v_base + d];
  }
  return acc;
}

@compute @workgroup_size(WG)
fn bwd_preprocess(@builtin(workgroup_id) wid: vec3<u32>,
                  @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
  let row = row_index(wid, nwg, lid);  // t * heads_q + h
  let rows = params.total_q * params.heads_q;
  if (row >= rows) {
    return;
  }
  let base = row * params.head_dim;
  var delta: f32 = 0.0;
  for (var d: u32 = 0u; d < params.head_dim; d++) {
    delta += dout[base + d] * out[base + d];
  }
  stats[rows + row] = delta;
}

@compute @workgroup_size(WG)
fn bwd_dkdv(@builtin(workgroup_id) wid: vec3<u32>,
            @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
  let row = row_index(wid, nwg, lid);  // tk * heads_kv + g
  let kv_rows = params.total_k * params.heads_kv;
  if (row >= kv_rows) {
    return;
  }
  let tk = row / params.heads_kv;
  let g = row % params.heads_kv;
  let group = params.heads_q / params.heads_kv;
  let b = seq_of_k(i32(tk));
  let q0 = cu_seqlens_q[b];
  let len_q = cu_seqlens_q[b + 1u] - q0;
  let len_k = cu_seqlens_k[b + 1u] - cu_seqlens_k[b];
  let jk = i32(tk) - cu_seqlens_k[b];
  let offset = diagonal_offset(len_q, len_k, params.align_top_left);

  // Queries i that see key jk: [i_lo, i_hi].
  let seen_by = visible_queries(jk, jk, offset, len_q, params.window_left, params.window_right);
  let i_lo = seen_by.x;
  let i_hi = seen_by.y - 1;

  let kv_base = row * params.head_dim;
  let rows_q = params.total_q * params.heads_q;
  let dv_off = kv_rows * params.head_dim;
  for (var c0: u32 = 0u; c0 < params.head_dim; c0 += CHUNK) {
    let width = min(CHUNK, params.head_dim - c0);
    var dk_acc: array<f32, CHUNK>;
    var dv_acc: array<f32, CHUNK>;
    var dk_part: array<f32, CHUNK>;
    var dv_part: array<f32, CHUNK>;
    for (var c: u32 = 0u; c < width; c++) {
      dk_acc[c] = 0.0;
      dv_acc[c] = 0.0;
    }
    for (var hh: u32 = 0u; hh < group; hh++) {
      let h = g * group + hh;
      let slope = alibi_slope(h);
      for (var i0: i32 = i_lo; i0 <= i_hi; i0 += SUM_BLOCK) {
        let i1 = min(i0 + (SUM_BLOCK - 1), i_hi);
        for (var c: u32 = 0u; c < width; c++) {
          dk_part[c] = 0.0;
          dv_part[c] = 0.0;
        }
        for (var i: i32 = i0; i <= i1; i++) {
          let qrow = u32(q0 + i) * params.heads_q + h;
          let lse = stats[qrow];
          if (!is_finite_bits(lse)) {
            continue;
          }
          let q_base = qrow * params.head_dim;
          let sc = score(q_base, kv_base, lse, -slope * f32(abs(jk - (i + offset))));
          let dp = dot_dout_v(q_base, kv_base);
          let ds = sc.ds_factor * (dp - stats[rows_q + qrow]);
          for (var c: u32 = 0u; c < width; c++) {
            dv_part[c] += sc.p * dout[q_base + c0 + c];
            dk_part[c] += ds * q[q_base + c0 + c];
          }
        }
        for (var c: u32 = 0u; c < width; c++) {
          dk_acc[c] += dk_part[c];
          dv_acc[c] += dv_part[c];
        }
      }
    }
    for (var c: u32 = 0u; c < width; c++) {
      dkv[kv_base + c0 + c] = dk_acc[c] * params.scale;
      dkv[dv_off + kv_base + c0 + c] = dv_acc[c];
    }
  }
}

@compute @workgroup_size(WG)
fn bwd_dq(@builtin(workgroup_id) wid: vec3<u32>,
          @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
  let row = row_index(wid, nwg, lid);  // t * heads_q + h
  let rows_q = params.total_q * params.heads_q;
  if (row >= rows_q) {
    return;
  }
  let t = row / params.heads_q;
  let h = row % params.heads_q;
  let g = h / (params.heads_q / params.heads_kv);
  let b = seq_of_q(i32(t));
  let len_q = cu_seqlens_q[b + 1u] - cu_seqlens_q[b];
  let k0 = cu_seqlens_k[b];
  let len_k = cu_seqlens_k[b + 1u] - k0;
  let iq = i32(t) - cu_seqlens_q[b];
  let offset = diagonal_offset(len_q, len_k, params.align_top_left);

  // Keys j visible to query iq: [j_lo, j_hi].
  let sees = visible_keys(iq, iq, offset, len_k, params.window_left, params.window_right);
  let j_lo = sees.x;
  var j_hi = sees.y - 1;
  let lse = stats[row];
  if (!is_finite_bits(lse)) {
    j_hi = j_lo - 1;  // the row contributes nothing: dq = 0
  }
  let delta = stats[rows_q + row];
  let slope = alibi_slope(h);
  let pos = iq + offset;  // the row's position on the diagonal, ALiBi's origin

  let q_base = row * params.head_dim;
  for (var c0: u32 = 0u; c0 < params.head_dim; c0 += CHUNK) {
    let width = min(CHUNK, params.head_dim - c0);
    var acc: array<f32, CHUNK>;
    var part: array<f32, CHUNK>;
    for (var c: u32 = 0u; c < width; c++) {
      acc[c] = 0.0;
    }
    for (var j0: i32 = j_lo; j0 <= j_hi; j0 += SUM_BLOCK) {
      let j1 = min(j0 + (SUM_BLOCK - 1), j_hi);
      for (var c: u32 = 0u; c < width; c++) {
        part[c] = 0.0;
      }
      for (var j: i32 = j0; j <= j1; j++) {
        let k_base = (u32(k0 + j) * params.heads_kv + g) * params.head_dim;
        let sc = score(q_base, k_base, lse, -slope * f32(abs(j - pos)));
        let dp = dot_dout_v(q_base, k_base);
        let ds = sc.ds_factor * (dp - delta);
        for (var c: u32 = 0u; c < width; c++) {
          part[c] += ds * k[k_base + c0 + c];
        }
      }
      for (var c: u32 = 0u; c < width; c++) {
        acc[c] += part[c];
      }
    }
    for (var c: u32 = 0u; c < width; c++) {
      dq[q_base + c0 + c] = acc[c] * params.scale;
    }
  }
}
