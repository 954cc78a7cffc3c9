// varlen_fwd.seed: packed variable-length attention forward with LSE, the original varlen_fwd
// kernel's interface and algorithm, wgattn's contract.
//
//   For sequence b, query token t of it (position pos = t - cu_q[b]) and head h:
//     s_j = scale * q[t,h,:].k[j,h,:]   for visible keys j
//     lse[t,h]   = log(sum_j exp(s_j))                 (-inf when no key is visible)
//     out[t,h,:] = sum_j exp(s_j - lse[t,h]) v[j,h,:]  (0 when no key is visible)
//   Visible keys: cu_k[b] <= j < cu_k[b+1]; with causal, also j - cu_k[b] <= pos (top-left
//   alignment, the original's: FlashAttention >= 2.1 aligns bottom-right when len_q != len_k).
//   Two passes over the visible keys, as in the original: the maximum score, then the exp-sum and the
//   weighted sum of V. Any head_dim: V's columns go CHUNK at a time, each chunk recomputing the
//   scores (the sum is recomputed with them, in the same order, so every chunk divides by the
//   same value).
//
// Layouts (row-major, head_dim contiguous): q, out [total_tokens_q, num_heads, head_dim];
// k, v [total_tokens_k, num_heads, head_dim]; lse [total_tokens_q, num_heads] (token-major);
// cu_seqlens_q/k [batch_size + 1], prefix sums from 0 (validated by the host).
// Grid: one invocation per packed query token, looping over all heads (the original's parallelism:
// the baseline fast kernels are measured against); WG tokens per workgroup, the workgroup count
// folded into x and y so that more than 65535 workgroups can be used.
// Reference: wgattn.reference.varlen_attention_fwd(..., causal_align="top_left"), keywords mapped
// in wgattn/interfaces/varlen_fwd.py.

override WG: u32;            // invocations (query tokens) per workgroup
const CHUNK: u32 = 64u;      // output columns one sweep over the keys accumulates (any head_dim works)
const LOG2E: f32 = 1.4426950408889634;
const LOWEST: f32 = -3.4028234663852886e38;  // finite "minus infinity": WGSL may assume no infinities

#include "interfaces/varlen_fwd.wgsl"
#include "lib/varlen.wgsl"
#include "lib/varlen_tokens.wgsl"

fn score(q_base: u32, k_base: u32) -> f32 {
  var dot: f32 = 0.0;
  for (var d: u32 = 0u; d < params.head_dim; d++) {
    dot += q[q_base + d] * k[k_base + d];
  }
  return dot * params.scale;
}

@compute @workgroup_size(WG)
fn varlen_attention_fwd_f32(@builtin(workgroup_id) wid: vec3<u32>,
                            @builtin(num_workgroups) nwg: vec3<u32>,
                            @builtin(local_invocation_index) lid: u32) {
  let t = (wid.y * nwg.x + wid.x) * WG + lid;
  if (t >= params.total_tokens_q || params.batch_size == 0u) {
    return;
  }
  let H = params.num_heads;
  let D = params.head_dim;
  let b = seq_of_q(i32(t));
  let pos = t - u32(cu_seqlens_q[b]);
  let k_start = u32(cu_seqlens_k[b]);
  let len_k = u32(cu_seqlens_k[b + 1u]) - k_start;
  // Visible keys are k_start .. k_start + n_keys - 1: causal (top-left: right bound 0) keys past
  // pos are never walked.
  let band = visible_keys(i32(pos), i32(pos), 0, i32(len_k), -1, select(-1, 0, params.causal != 0u));
  let n_keys = u32(band.y);

  for (var h: u32 = 0u; h < H; h++) {
    let q_base = (t * H + h) * D;
    let o_base = q_base;

    if (n_keys == 0u) {
      // No visible key: the contract's empty row (the original's clamped sum gave lse = log(1e-10)).
      for (var d: u32 = 0u; d < D; d++) {
        out[o_base + d] = 0.0;
      }
      lse[t * H + h] = neg_inf();
      continue;
    }

    // Pass 1: the maximum score over the visible keys.
    var m: f32 = LOWEST;
    for (var j: u32 = 0u; j < n_keys; j++) {
      m = max(m, score(q_base, ((k_start + j) * H + h) * D));
    }

    // Pass 2, per chunk of columns: the exp-sum and the weighted sum of V. Weights are
    // exp(s - m) = exp2((s - m) * LOG2E) (scale by log2(e) to use exp2); s - m <= 0, and the
    // maximal key gives 1, so l >= 1 and neither the division nor the log can see 0.
    var l: f32 = 0.0;
    for (var c0: u32 = 0u; c0 < D; c0 += CHUNK) {
      let width = min(CHUNK, D - c0);
      var acc: array<f32, CHUNK>;
      for (var c: u32 = 0u; c < width; c++) {
        acc[c] = 0.0;
      }
      l = 0.0;
      for (var j: u32 = 0u; j < n_keys; j++) {
        let row = ((k_start + j) * H + h) * D;
        let w = exp2((score(q_base, row) - m) * LOG2E);
        l += w;
        let v_base = row + c0;
        for (var c: u32 = 0u; c < width; c++) {
          acc[c] += w * v[v_base + c];
        }
      }
      let inv_l = 1.0 / l;
      for (var c: u32 = 0u; c < width; c++) {
        out[o_base + c0 + c] = acc[c] * inv_l;
      }
    }
    lse[t * H + h] = m + log(l);
  }
}
