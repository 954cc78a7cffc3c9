// attn_probs.seed: the original attn_probs kernel's attention probabilities (Gemma style) on its
// interface, wgattn's contract.
//
//   probs[h, t] = exp(s_t - m) / sum_{u visible} exp(s_u - m)   for visible t, exactly 0 otherwise
//   s_t = q[h, :] . k_hist[t, h / heads_per_kv, :]   (un-scaled: no 1/sqrt(head_dim))
//   m   = max_{u visible} s_u
//   visible t: earliest <= t <= pos, earliest = pos + 1 - window when window != 0 and
//              pos + 1 >= window, else 0 (window counts the visible keys including the current
//              one; 0 is unbounded). Key pos is always visible, so no row is empty.
//
// Layout: q [n_heads, head_dim], k_hist [history_len, n_kv_heads, head_dim] (the sequence is the
// slow axis), probs [n_heads, history_len]; all contiguous f32.
// Grid: one workgroup of WG invocations per query head (x = head). The invocations stride over
// the keys; invocation `lid` owns the keys t with t % WG == lid in every sweep, so each only
// reads back the probs entries it wrote itself:
//   1. scores: s_t into probs (0 for invisible keys), and a per-invocation maximum (each dot
//      product summed pairwise, see dot_qk);
//      a workgroup tree reduction of the maxima gives m;
//   2. exp: probs[t] = exp(s_t - m), and a per-invocation sum; a second tree reduction gives l;
//   3. normalise: probs[t] /= l.
// Only WG floats of workgroup memory are used, so any history_len works (the original kept every
// score in a fixed 4096-entry workgroup array). A barrier separates reading m out of the scratch from
// reusing the scratch for the sum (the original's race).
// Reference: wgattn.reference.attention_probs(q, k_hist, pos=pos, window=window, scale=1.0),
// keywords mapped in wgattn/interfaces/attn_probs.py.

override WG: u32;            // invocations per workgroup (any value >= 1; need not be a power of two)
const LOG2E: f32 = 1.4426950408889634;
const LOWEST: f32 = -3.4028234663852886e38;  // finite "minus infinity": WGSL may assume no infinities

#include "interfaces/attn_probs.wgsl"

var<workgroup> scratch: array<f32, WG>;  // one partial maximum (then sum) per invocation

#include "lib/reduce.wgsl"

// q[qb .. qb + d) . k_hist[kb .. kb + d), summed pairwise (a cascade over blocks of 4 products,
// merged like a binary counter): the rounding error grows with log2(d) instead of d. A plain
// running sum loses to NumPy's float32 matmul on peaked rows (the tolerance rule's yardstick),
// and compensated (Kahan) sums are optimised away by some compilers (lavapipe's).
fn dot_qk(qb: u32, kb: u32, d: u32) -> f32 {
  var pending: array<f32, 32>;  // pending[l]: the sum of 4 * 2^l products, valid when bit l of blocks is set
  var blocks: u32 = 0u;         // complete blocks of 4 products so far
  var i: u32 = 0u;
  for (; i + 4u <= d; i += 4u) {
    let pr = vec4<f32>(q[qb + i], q[qb + i + 1u], q[qb + i + 2u], q[qb + i + 3u])
           * vec4<f32>(k_hist[kb + i], k_hist[kb + i + 1u], k_hist[kb + i + 2u], k_hist[kb + i + 3u]);
    var v = (pr.x + pr.y) + (pr.z + pr.w);
    var level: u32 = 0u;
    for (var c: u32 = blocks; (c & 1u) == 1u; c = c >> 1u) {  // carry: merge equal-sized sums
      v = pending[level] + v;
      level++;
    }
    pending[level] = v;
    blocks++;
  }
  var total: f32 = 0.0;
  for (; i < d; i++) {  // the last d % 4 products
    total += q[qb + i] * k_hist[kb + i];
  }
  for (var level: u32 = 0u; level < 32u; level++) {  // smallest pending sums first
    if (((blocks >> level) & 1u) == 1u) {
      total += pending[level];
    }
  }
  return total;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let head = wid.x;
  // workgroup_id is the same for the whole workgroup: this return is uniform and no
  // invocation of a surplus workgroup reaches a barrier.
  if (head >= params.n_heads) {
    return;
  }
  let d = params.head_dim;
  let hist = params.history_len;
  let kv = head / params.heads_per_kv;
  let q_base = head * d;
  let row = head * hist;

  // Visible keys: [lo, hi).
  let hi = params.pos + 1u;
  var lo: u32 = 0u;
  if (params.window != 0u && hi >= params.window) {
    lo = hi - params.window;
  }
  // This invocation's first visible key (the first t >= lo with t % WG == lid).
  let first = lo + (lid + WG - lo % WG) % WG;

  // Sweep 1: scores of visible keys into probs, 0 for every other key of the row.
  var m_own: f32 = LOWEST;
  for (var t: u32 = lid; t < hist; t += WG) {
    var s: f32 = 0.0;
    if (t >= lo && t < hi) {
      s = dot_qk(q_base, (t * params.n_kv_heads + kv) * d, d);
      m_own = max(m_own, s);
    }
    probs[row + t] = s;
  }
  scratch[lid] = m_own;
  workgroupBarrier();
  reduce_max(lid);
  let m = scratch[0];  // finite: key pos is visible
  // Every invocation must have read m before any reuses the scratch for its sum.
  workgroupBarrier();  // max-sum separation

  // Sweep 2: exp(s - m) in place, and this invocation's share of the sum.
  var l_own: f32 = 0.0;
  for (var t: u32 = first; t < hi; t += WG) {
    let e = exp2((probs[row + t] - m) * LOG2E);
    probs[row + t] = e;
    l_own += e;
  }
  scratch[lid] = l_own;
  workgroupBarrier();
  reduce_sum(lid);
  let l = scratch[0];  // >= 1: the maximal key contributes exp(0)

  // Sweep 3: normalise.
  for (var t: u32 = first; t < hi; t += WG) {
    probs[row + t] = probs[row + t] / l;
  }
}
