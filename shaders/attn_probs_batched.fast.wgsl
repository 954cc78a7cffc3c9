#if SUBGROUP
enable subgroups;
#endif

// attn_probs_batched.fast (and attn_probs_batched.subgroup, define SUBGROUP): attention
// probabilities of many query positions at once (Gemma style, GQA, sliding window, any history
// length). fast is portable (no optional feature); subgroup does its two workgroup reductions with
// subgroup operations (the "subgroups" feature).
//
//   probs[i, h, t] = exp(s_t - m) / sum_{u visible} exp(s_u - m)   for visible t, exactly 0 otherwise
//   s_t = scale * q[i, h, :] . k_hist[t, h / heads_per_kv, :]
//   m   = max_{u visible} s_u
//   visible t: earliest <= t <= p, p = positions[i], earliest = p + 1 - window when window != 0
//              and p + 1 >= window, else 0 (window counts the visible keys including the current
//              one; 0 is unbounded). Key p is always visible, so no row is empty.
//
// Layout (all contiguous): q [n_pos, n_heads, D4] and k_hist [history_len, n_kv_heads, D4] as vec4s,
// D4 = ceil(head_dim / 4), each row zero-padded past head_dim by the host (zeros add nothing to a
// dot product); positions [n_pos] u32; probs [n_pos, n_heads, history_len] f32.
//
// Grid: one workgroup of WG invocations per block of 4 rows that share a key head. The rows of
// key head kv are numbered j = position_index * heads_per_kv + g (query head kv * heads_per_kv + g);
// block b holds rows 4b .. 4b + 3, so a block is 4 query heads of one position under GQA 4, or 4
// positions of one head without GQA: each key vector is loaded once for 4 rows, and the 4 rows'
// scores, maxima and sums travel together as the lanes of a vec4. The block count, folded into
// (x, y) by the registry, is n_kv_heads * ceil(heads_per_kv * n_pos / 4).
// The invocations stride over the keys; over the block's range [lo_any, hi_any) (the union of its
// rows' windows) invocation `lid` owns the keys t with t % WG == lid in every sweep, so each only
// reads back the probs entries it wrote itself:
//   1. scores: s_t into probs for visible keys, 0 for every other key of the row, and a
//      per-invocation maximum per row; keys outside the range get 0 without a score (rows whose
//      positions are far apart share a block's range: positions in order, as in a backward, keep
//      the ranges of a block's rows nearly equal);
//      an invocation takes two of its keys at a time (t and t + WG), so each q vec4 it loads
//      serves 8 dot products; a workgroup tree reduction of the maxima gives m (vec4: one per row);
//   2. exp: probs[t] = exp(s_t - m), and per-invocation sums (blocks of 16 keys added into a
//      running total); a second tree reduction gives l;
//   3. normalise: probs[t] /= l.
// Each dot product keeps 4 partial sums (a vec4 accumulator over the head dim's vec4s: D / 4
// products each) merged pairwise at the end; NumPy's float32 matmul, the yardstick, sums all D.
// No barrier comes before sweep 1: on CPU implementations (lavapipe) code after a barrier runs
// from a coroutine frame, which slows a hot loop that follows one.
// Reductions (max, then sum; vec4 lanes = the block's 4 rows). fast: workgroup tree reductions
// (lib/reduce.wgsl) over WG vec4s of workgroup memory (4 KiB at WG 256). subgroup: subgroupMax /
// subgroupAdd within each subgroup, then one workgroup slot per subgroup, folded by every
// invocation in slot order. Nothing is assumed about the subgroup size (1 to 128 all work, and
// partial subgroups when WG is not a multiple of it; the subgroup_size builtin is not even needed)
// nor about which invocations share a subgroup: each subgroup's leader (its smallest local index,
// subgroupMin) sets its bit in a workgroup bitmask, and its slot is the number of leaders below it.
// The numbering comes after sweep 1, so that no barrier precedes the hot loop. Workgroup memory:
// WG vec4s plus ceil(WG / 32) words, whatever the history length. Either way a barrier separates
// every invocation's reading of the maxima from the memory's reuse for the sums (the original attn_probs
// kernel's race).
// Reference: wgattn.reference.attention_probs_batched(q, k_hist, positions, window=, scale=).

override WG: u32;            // invocations per workgroup (any value >= 1; need not be a power of two)
const LOWEST: f32 = -3.4028234663852886e38;  // finite "minus infinity": WGSL may assume no infinities
const SUM_BLOCK: u32 = 16u;  // keys summed on their own before joining an invocation's running sum

#include "interfaces/attn_probs_batched.wgsl"

#if SUBGROUP
const SLOT_BLOCK: u32 = 8u;   // subgroup slots summed on their own before joining the total

var<workgroup> sg_part: array<vec4<f32>, WG>;                      // one slot per subgroup (at most WG)
var<workgroup> leader_bits: array<atomic<u32>, (WG + 31u) / 32u>;  // bit lid: lid leads its subgroup
#else
var<workgroup> scratch: array<vec4<f32>, WG>;  // one partial maximum (then sum) per invocation

#include "lib/reduce.wgsl"
#endif

fn hsum(v: vec4<f32>) -> f32 {
  return (v.x + v.y) + (v.z + v.w);
}

struct Scores {
  a: vec4<f32>,  // the 4 rows' dot products with key row ka
  b: vec4<f32>,  // ... with key row kb
}

// The 4 rows' dot products (q rows at qb, in vec4s) with two key rows (at ka and kb): each q vec4
// loaded once for both keys; one vec4 accumulator (4 partial sums) per row and key.
fn dots4x2(qb: vec4<u32>, ka: u32, kb: u32, d4: u32) -> Scores {
  var a0 = vec4<f32>(0.0);
  var a1 = vec4<f32>(0.0);
  var a2 = vec4<f32>(0.0);
  var a3 = vec4<f32>(0.0);
  var b0 = vec4<f32>(0.0);
  var b1 = vec4<f32>(0.0);
  var b2 = vec4<f32>(0.0);
  var b3 = vec4<f32>(0.0);
  for (var i: u32 = 0u; i < d4; i++) {
    let q0 = q[qb.x + i];
    let q1 = q[qb.y + i];
    let q2 = q[qb.z + i];
    let q3 = q[qb.w + i];
    let k_a = k_hist[ka + i];
    let k_b = k_hist[kb + i];
    a0 = fma(q0, k_a, a0);
    a1 = fma(q1, k_a, a1);
    a2 = fma(q2, k_a, a2);
    a3 = fma(q3, k_a, a3);
    b0 = fma(q0, k_b, b0);
    b1 = fma(q1, k_b, b1);
    b2 = fma(q2, k_b, b2);
    b3 = fma(q3, k_b, b3);
  }
  return Scores(vec4<f32>(hsum(a0), hsum(a1), hsum(a2), hsum(a3)),
                vec4<f32>(hsum(b0), hsum(b1), hsum(b2), hsum(b3)));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let hpk = params.heads_per_kv;
  let rows_per_kv = hpk * params.n_pos;
  let blocks_per_kv = (rows_per_kv + 3u) / 4u;
  let block = wid.y * nwg.x + wid.x;
  // The same for the whole workgroup: this return is uniform and no invocation of a surplus
  // workgroup reaches a barrier.
  if (block >= params.n_kv_heads * blocks_per_kv) {
    return;
  }
  let kv = block / blocks_per_kv;
  let j0 = (block % blocks_per_kv) * 4u;
  let d4 = (params.head_dim + 3u) / 4u;
  let hist = params.history_len;

  // The block's rows: probs row base, q row base (vec4s), visible keys [lo, hi). A row past the
  // end of this key head's list is invalid: lo = hi = 0 (nothing visible, nothing written) and it
  // borrows row 0's q so that every load stays in bounds.
  var row_base = vec4<u32>(0u);
  var q_base = vec4<u32>(0u);
  var lo = vec4<u32>(0u);
  var hi = vec4<u32>(0u);
  var valid = vec4<bool>(false);
  for (var r: u32 = 0u; r < 4u; r++) {
    let j = min(j0 + r, rows_per_kv - 1u);
    let pidx = j / hpk;
    let row = pidx * params.n_heads + kv * hpk + j % hpk;
    row_base[r] = row * hist;
    q_base[r] = row * d4;
    if (j0 + r < rows_per_kv) {
      valid[r] = true;
      let p = positions[pidx];
      hi[r] = p + 1u;
      if (params.window != 0u && p + 1u >= params.window) {
        lo[r] = p + 1u - params.window;
      }
    }
  }
  // Keys some row of the block sees: [lo_any, hi_any).
  var lo_any: u32 = hist;
  var hi_any: u32 = 0u;
  for (var r: u32 = 0u; r < 4u; r++) {
    if (valid[r]) {
      lo_any = min(lo_any, lo[r]);
      hi_any = max(hi_any, hi[r]);
    }
  }
  let kv_stride = params.n_kv_heads * d4;

  // This invocation's first key of the block's range (the first t >= lo_any with t % WG == lid).
  let first = lo_any + (lid + WG - lo_any % WG) % WG;

  // Sweep 1: 0 for the keys no row of the block sees, without a score ...
  for (var t: u32 = lid; t < lo_any; t += WG) {
    for (var r: u32 = 0u; r < 4u; r++) {
      if (valid[r]) {
        probs[row_base[r] + t] = 0.0;
      }
    }
  }
  for (var t: u32 = hi_any + lid; t < hist; t += WG) {
    for (var r: u32 = 0u; r < 4u; r++) {
      if (valid[r]) {
        probs[row_base[r] + t] = 0.0;
      }
    }
  }
  // ... and the scores of keys [lo_any, hi_any), 0 where a row does not see the key; keys t and
  // t + WG together (the second clamped into the range for its loads, and dropped past it).
  var m_own = vec4<f32>(LOWEST);
  for (var t: u32 = first; t < hi_any; t += 2u * WG) {
    let kv_off = kv * d4;
    let sc = dots4x2(q_base, t * kv_stride + kv_off, min(t + WG, hi_any - 1u) * kv_stride + kv_off, d4);
    for (var j: u32 = 0u; j < 2u; j++) {
      let tk = t + j * WG;
      if (tk < hi_any) {
        let vis = valid & (vec4<u32>(tk) >= lo) & (vec4<u32>(tk) < hi);
        let s = select(vec4<f32>(0.0), select(sc.a, sc.b, j == 1u) * params.scale, vis);
        m_own = select(m_own, max(m_own, s), vis);
        for (var r: u32 = 0u; r < 4u; r++) {
          if (valid[r]) {
            probs[row_base[r] + tk] = s[r];
          }
        }
      }
    }
  }
#if SUBGROUP
  // Number the subgroups: the leader of each (its smallest local index) sets its bit, and its slot
  // is the count of leaders below it; n_sg is the number of subgroups. Any size, any layout.
  let words = (WG + 31u) / 32u;
  if (lid < words) {
    atomicStore(&leader_bits[lid], 0u);
  }
  workgroupBarrier();
  let leader = subgroupMin(lid);
  let leads = lid == leader;
  if (leads) {
    atomicOr(&leader_bits[lid / 32u], 1u << (lid % 32u));
  }
  workgroupBarrier();
  var n_sg: u32 = 0u;
  var slot: u32 = 0u;
  for (var w: u32 = 0u; w < words; w++) {
    let bits = atomicLoad(&leader_bits[w]);
    n_sg += countOneBits(bits);
    if (w < lid / 32u) {
      slot += countOneBits(bits);
    } else if (w == lid / 32u) {
      slot += countOneBits(bits & ((1u << (lid % 32u)) - 1u));
    }
  }

  let m_sg = subgroupMax(m_own);
  if (leads) {
    sg_part[slot] = m_sg;
  }
  workgroupBarrier();
  var m = sg_part[0];
  for (var i: u32 = 1u; i < n_sg; i++) {
    m = max(m, sg_part[i]);
  }
  // m is finite on valid rows: key p is visible.
  // Every invocation must have read the maxima before any leader reuses the slots for its sum.
  workgroupBarrier();  // max-sum separation
#else
  scratch[lid] = m_own;
  workgroupBarrier();
  reduce_max(lid);
  let m = scratch[0];  // finite on valid rows: key p is visible
  // Every invocation must have read m before any reuses the scratch for its sum.
  workgroupBarrier();  // max-sum separation
#endif

  // Sweep 2: exp(s - m) in place, and this invocation's share of each row's sum.
  var l_own = vec4<f32>(0.0);
  var l_blk = vec4<f32>(0.0);
  var in_blk: u32 = 0u;
  for (var t: u32 = first; t < hi_any; t += WG) {
    let vis = (vec4<u32>(t) >= lo) & (vec4<u32>(t) < hi);  // false on invalid rows (lo = hi = 0)
    var e = vec4<f32>(0.0);
    for (var r: u32 = 0u; r < 4u; r++) {
      if (vis[r]) {
        e[r] = exp(probs[row_base[r] + t] - m[r]);
        probs[row_base[r] + t] = e[r];
      }
    }
    l_blk += e;
    in_blk++;
    if (in_blk == SUM_BLOCK) {
      l_own += l_blk;
      l_blk = vec4<f32>(0.0);
      in_blk = 0u;
    }
  }
#if SUBGROUP
  let l_sg = subgroupAdd(l_own + l_blk);
  if (leads) {
    sg_part[slot] = l_sg;
  }
  workgroupBarrier();
  // Every invocation folds the slots in the same order (blocks of SLOT_BLOCK, then the blocks):
  // the same l everywhere; l >= 1 on valid rows, where the maximal key contributes exp(0).
  var l = vec4<f32>(0.0);
  for (var i: u32 = 0u; i < n_sg; i += SLOT_BLOCK) {
    var part = vec4<f32>(0.0);
    for (var k: u32 = i; k < min(i + SLOT_BLOCK, n_sg); k++) {
      part += sg_part[k];
    }
    l += part;
  }
#else
  scratch[lid] = l_own + l_blk;
  workgroupBarrier();
  reduce_sum(lid);
  let l = scratch[0];  // >= 1 on valid rows: the maximal key contributes exp(0)
#endif

  // Sweep 3: normalise.
  for (var t: u32 = first; t < hi_any; t += WG) {
    for (var r: u32 = 0u; r < 4u; r++) {
      if (t >= lo[r] && t < hi[r]) {
        probs[row_base[r] + t] = probs[row_base[r] + t] / l[r];
      }
    }
  }
}
