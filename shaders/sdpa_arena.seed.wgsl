// sdpa_arena.seed: masked scaled-dot-product attention on the original sdpa_arena
// kernel's interface, wgattn's contract.
//
//   out[b,h,i,:] = sum_j p_ij v[b,h,j,:],  p_ij = softmax over visible j of scale * q[b,h,i,:].k[b,h,j,:]
//   visible j (mask_kind): 0 every key; 1 causal, j <= i (top-left); 2 padding, mask value >= 0.5;
//                          3 sliding window, i - window <= j <= i (window + 1 keys).
//   A row with no visible key gets out = 0 (the original's -1e9 trick gave a uniform average instead).
//
// Layout: every tensor lives in one f32 arena at an element offset, addressed through
// (batch, head, seq) strides with a contiguous head_dim, so [B,H,S,D] and [B,S,H,D] both work;
// the mask has its own strides, a zero stride broadcasts.
// Grid: one invocation per (b, h, i) query row, WG rows per workgroup; the workgroup count is
// folded into x and y so that more than 65535 workgroups can be used.
// Reference: wgattn.reference.sdpa, keywords mapped in wgattn/interfaces/sdpa_arena.py.
// Baseline by design (one thread per row, no reuse between threads); fast kernels are separate.

override WG: u32;            // invocations (query rows) per workgroup
const CHUNK: u32 = 64u;      // output columns one sweep over the keys accumulates (any head_dim works)
const LOG2E: f32 = 1.4426950408889634;
const LOWEST: f32 = -3.4028234663852886e38;  // finite "minus infinity": WGSL may assume no infinities

#include "interfaces/sdpa_arena.wgsl"

fn key_visible(b: u32, h: u32, i: u32, j: u32) -> bool {
  if (p.mask_kind == 2u) {
    let m = p.mask_off + b * p.mask_b_stride + h * p.mask_h_stride + i * p.mask_sq_stride + j * p.mask_sk_stride;
    return arena[m] >= 0.5;
  }
  return true;  // kinds 1 and 3 are handled by the key range
}

@compute @workgroup_size(WG)
fn attention(@builtin(workgroup_id) wid: vec3<u32>,
             @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  let row = (wid.y * nwg.x + wid.x) * WG + lid;
  if (row >= p.batch * p.heads * p.seq_q) {
    return;
  }
  let i = row % p.seq_q;
  let h = (row / p.seq_q) % p.heads;
  let b = row / (p.seq_q * p.heads);

  // Visible keys form the range [lo, hi) for the causal and window kinds: skip the rest.
  var lo: u32 = 0u;
  var hi: u32 = p.seq_k;
  if (p.mask_kind == 1u || p.mask_kind == 3u) {
    hi = min(i + 1u, p.seq_k);
  }
  if (p.mask_kind == 3u && i > p.window) {
    lo = i - p.window;
  }

  let q_base = p.q_off + b * p.q_b + h * p.q_h + i * p.q_s;
  let o_base = p.out_off + b * p.o_b + h * p.o_h + i * p.o_s;
  // exp2 does the exponentials, on differences of scores: (s - m) * log2(e). Scaling each score
  // to log2 units first would round a large score (|s| ~ 70) to 4e-6 before the max is taken
  // off, an error 60x a naive float32 run's (docs/reliability.md's fuzz found it).

  for (var c0: u32 = 0u; c0 < p.head_dim; c0 += CHUNK) {
    let width = min(CHUNK, p.head_dim - c0);
    var acc: array<f32, CHUNK>;
    var m: f32 = LOWEST;   // running maximum of the scores seen
    var l: f32 = 0.0;      // running sum of exp2(score - m)
    for (var c: u32 = 0u; c < width; c++) {
      acc[c] = 0.0;
    }
    for (var j: u32 = lo; j < hi; j++) {
      if (!key_visible(b, h, i, j)) {
        continue;
      }
      let k_base = p.k_off + b * p.k_b + h * p.k_h + j * p.k_s;
      var dot: f32 = 0.0;
      for (var d: u32 = 0u; d < p.head_dim; d++) {
        dot += arena[q_base + d] * arena[k_base + d];
      }
      let s = dot * p.scale;
      let m_new = max(m, s);
      let correction = exp2((m - m_new) * LOG2E);  // 0 on the first visible key: m was LOWEST
      let w = exp2((s - m_new) * LOG2E);
      l = l * correction + w;
      let v_base = p.v_off + b * p.v_b + h * p.v_h + j * p.v_s + c0;
      for (var c: u32 = 0u; c < width; c++) {
        acc[c] = acc[c] * correction + w * arena[v_base + c];
      }
      m = m_new;
    }
    // l == 0 exactly when no key was visible: the contract's empty row is 0, not NaN.
    let inv_l = select(0.0, 1.0 / l, l > 0.0);
    for (var c: u32 = 0u; c < width; c++) {
      arena[o_base + c0 + c] = acc[c] * inv_l;
    }
  }
}
