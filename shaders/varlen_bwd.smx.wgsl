// varlen_bwd.smx: FlashAttention-2 backward on subgroup matrices (tensor cores where the adapter
// has them): the products of each tile are f16 x f16 -> f32 matrix products, P and dS are formed
// in f32 and rounded to f16 for the products that take them (as FlashAttention does). wgattn's
// varlen_bwd contract: packed varlen, GQA, (left, right) windows in both alignments, softcap,
// ALiBi, attention sinks; deterministic (every output element is written by one invocation, no
// atomics).
//
//   Per sequence b, query row i (head h), key j (kv head g = h / (heads_q / heads_kv)):
//     s0_ij = scale * q_i . k_j;  s_ij = softcap * tanh(s0_ij / softcap) if softcap > 0 else s0_ij
//     s_ij -= slope_h * |j - (i + offset)|  (alibi_on; the interface's alibi_slope(h))
//     P_ij  = exp(s_ij - lse_i) on visible (i, j); a row with a non-finite lse contributes nothing
//             (a sink needs nothing here: lse holds its term, and the interface's own pass,
//             bwd_dsinks, takes its gradient)
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
// dkv [2, total_k, heads_kv, D]; stats [2, total_q, heads_q]: lse (the host's), then delta (then
// the ALiBi slopes and the sinks, [2, heads_q]). With
// VEC4 (head_dim % 4 == 0) the kernel reads and writes them as vec4 rows. The inputs are rounded
// to f16 as they are staged (the kernel is judged by the f16 rule).
//
// One matrix shape, S x S x S (the plan refuses a configuration with M, N, K not all equal: every
// staged tile then serves as a left, a right and a transposed right operand). Three passes, as
// FlashAttention-2's and Triton's backward (WGSL has no float atomics, so dQ is not summed across
// key blocks: the dq pass recomputes S and dP per query block instead):
//   bwd_preprocess  delta = dout . out, one invocation per (query token, head).
//   bwd_dkdv        a workgroup per (block of BF = RB * S keys, sequence, kv head): K and V of the
//                   block are left fragments in registers for the whole pass, loaded once for
//                   every query head of the GQA group; it walks the tiles of BT query rows that
//                   any key of the block sees, head after head of the group:
//                     Sᵀ = K Qᵀ, dPᵀ = V doutᵀ (to workgroup memory) | Pᵀ and dSᵀ elementwise (f16)
//                     | dK += dSᵀ Q, dV += Pᵀ dout.
//   bwd_dq          a workgroup per (block of BF query rows, sequence, query head), the blocks
//                   that see the most keys first: Q and dout in registers; per tile of BT keys of
//                   the block's band: S = Q Kᵀ, dP = dout Vᵀ | dS | dQ += dS K.
// Roles. The two score products of a tile take different left operands (K and V; Q and dout), and
// so do the two accumulating products of bwd_dkdv (dSᵀ with Q, Pᵀ with dout): role 0 is the first
// of each pair (Sᵀ then dK; S then half of dQ), role 1 the second (dPᵀ then dV; dP then the other
// half of dQ). Row block f has DS subgroups: with DS = 2, subgroup f * 2 + r takes role r and
// keeps only that role's left fragments and accumulators (half the registers: at D = 128 one
// subgroup holding both roles needs 8 + 8 left and 8 + 8 result fragments, 192 registers a lane,
// more than 512 invocations a workgroup leave it); with DS = 1 one subgroup takes both.
// The tile (the manifest's, best first) is 4 row blocks with DS = 2 and one tile buffer at head
// dims up to 64: under 24 KiB of workgroup memory and 128 registers a lane, NVIDIA's driver runs
// two workgroups an SM, where 8 row blocks with DS = 1 and two buffers (47 KiB, 177 registers)
// got one (1.23x at D = 64 on the H100; docs/performance.md). Past 64 the fragments a role holds
// take more than 128 registers, and 8 row blocks with DS = 1 win.
// Staging. The next tile's rows (and in bwd_dkdv their lse and delta) are read into registers
// while this tile is computed (f32, converted when stored, so nothing waits for the loads). With
// NB = 2 tile buffers, a tile is stored while the last one's products still read the other
// buffer: three barriers a tile instead of four. The mask (windows, sequence ends) is evaluated
// only on tiles that cross one of its edges (a workgroup-uniform test per tile).
// Elementwise passes: BT / 4 lanes a row (a vec4 each; 4 on the H100), the rows in
// lib/bank_rows.wgsl's order, so that a quarter-warp's reads of Sᵀ and dPᵀ (or S and dP) meet no
// bank twice (on the H100, Chromium, one series: 88.6 -> 90.0 TFLOP/s at (2,16,4096,128), 52.8 ->
// 53.5 at (4,16,2048,64), causal).
// Straight-line: every loop over fragments, over a tile's share and over the elementwise pass is
// written out (wgsl.py's #for: x{r}_{c}, y{r}_{c}, a{f}/b{f}), so no register array exists for a
// driver to demote to local memory when it does not unroll a loop, and every matrix load takes
// a staging fragment [buffer and role][constant fragment] (NVIDIA's driver does not unroll loops
// without hints once they grow, and Tint emits none: gemm.smx measures the difference).
// Reference: wgattn.reference.varlen_attention_bwd.
#include "lib/subgroup_matrix.wgsl"

#include "interfaces/varlen_bwd.wgsl"
#include "lib/varlen.wgsl"
#include "lib/softcap.wgsl"
#include "lib/frag_pad.wgsl"
#include "lib/bank_rows.wgsl"

#if SMX_M16
const S: u32 = 16u;  // the fragments' side
#else
const S: u32 = 8u;
#endif
const P4: u32 = (S + 8u) / 4u;  // vec4<f16> stride of a fragment row, padded 16 bytes (banks)
const F4: u32 = (S + 4u) / 4u;  // vec4<f32> stride of a result fragment row
// The counts the written-out code repeats, from the plan's defines (for this head_dim and tile):
// MAX_DC head-dim chunks of S columns (DP / S); NT fragments along a tile (BT / S); DS subgroups
// per row block (a tile knob: 1 or 2), NR = 2 / DS roles each and DCS = MAX_DC / DS chunks of dQ;
// MAX_PF vec4 of each of a tile's two tensors one invocation prefetches; MAX_EW vec4 of a tile's
// P and dS one invocation forms.
#const MAX_DC
#const NT
#const DS
#const NR
#const DCS
#const MAX_PF
#const MAX_EW
const LOG2E: f32 = 1.4426950408889634;
const EMPTY_LSE: f32 = 1.0e30;  // stands for a non-finite lse: exp(s - EMPTY_LSE) is 0

alias LF = subgroup_matrix_left<f16, S, S>;
alias RF = subgroup_matrix_right<f16, S, S>;
alias AF = subgroup_matrix_result<f32, S, S>;
alias FragH = array<vec4<f16>, S * P4 + FRAG_PAD4>;  // one f16 fragment in workgroup memory, rows padded
alias FragF = array<vec4<f32>, S * F4>;  // one f32 fragment

override WG: u32;   // invocations per workgroup: RB * DS subgroups
override RB: u32;   // row blocks of S fixed rows (keys in bwd_dkdv, query rows in bwd_dq)
override BT: u32;   // rows of a tile (query rows in bwd_dkdv, keys in bwd_dq): NT * S
override DP: u32;   // head_dim rounded up to a multiple of 16 (zeros past head_dim): MAX_DC * S
override NB: u32 = 1u;      // tile buffers: 2 stores a tile while the last one is still read
override BF: u32 = RB * S;  // fixed rows per workgroup

// Tiles, [buffer * 2 + role][row fragment * MAX_DC + head-dim chunk][row * P4 + vec4 column],
// rows of the tile row-major: role 0 holds Q (bwd_dkdv) or K (bwd_dq), role 1 dout or V.
var<workgroup> tt: array<array<FragH, NT * MAX_DC>, NB * 2u>;
// Score results, [role * RB + row block][tile fragment]: fixed rows x tile rows. Role 0 Sᵀ
// (bwd_dkdv) or S (bwd_dq), role 1 dPᵀ or dP; they carry the accumulators to the output too.
var<workgroup> rs: array<array<FragF, NT>, 2u * RB>;
// f16 left operands of the accumulating products, same indexing: role 0 dSᵀ (or dS) times
// scale, role 1 Pᵀ (bwd_dkdv only).
var<workgroup> pp: array<array<FragH, NT>, 2u * RB>;
var<workgroup> lse_t: array<vec4<f32>, max(NB * BT, BF) / 4u>;   // lse of the rows whose P is formed
var<workgroup> delta_t: array<vec4<f32>, max(NB * BT, BF) / 4u>; // and their delta

// Vec4 column c of token-major row `row` of q, dout, k or v, zeros past head_dim.
#if VEC4
fn load_q(row: u32, c: u32, dim: u32) -> vec4<f32> {
  return select(vec4<f32>(0.0), q[row * (dim / 4u) + c], c * 4u < dim);
}
fn load_do(row: u32, c: u32, dim: u32) -> vec4<f32> {
  return select(vec4<f32>(0.0), dout[row * (dim / 4u) + c], c * 4u < dim);
}
fn load_k(row: u32, c: u32, dim: u32) -> vec4<f32> {
  return select(vec4<f32>(0.0), k[row * (dim / 4u) + c], c * 4u < dim);
}
fn load_v(row: u32, c: u32, dim: u32) -> vec4<f32> {
  return select(vec4<f32>(0.0), v[row * (dim / 4u) + c], c * 4u < dim);
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
fn load_do(row: u32, c: u32, dim: u32) -> vec4<f32> {
  var x = vec4<f32>(0.0);
  for (var e = 0u; e < 4u; e++) {
    if (c * 4u + e < dim) {
      x[e] = dout[row * dim + c * 4u + e];
    }
  }
  return x;
}
fn load_k(row: u32, c: u32, dim: u32) -> vec4<f32> {
  var x = vec4<f32>(0.0);
  for (var e = 0u; e < 4u; e++) {
    if (c * 4u + e < dim) {
      x[e] = k[row * dim + c * 4u + e];
    }
  }
  return x;
}
fn load_v(row: u32, c: u32, dim: u32) -> vec4<f32> {
  var x = vec4<f32>(0.0);
  for (var e = 0u; e < 4u; e++) {
    if (c * 4u + e < dim) {
      x[e] = v[row * dim + c * 4u + e];
    }
  }
  return x;
}
#endif

// Columns d .. d+3 of output row `row` (token * heads + head; dkv's dv rows follow its dk rows).
fn store_dq(row: u32, d: u32, dim: u32, y: vec4<f32>) {
#if VEC4
  dq[row * (dim / 4u) + d / 4u] = y;
#else
  for (var e = 0u; e < 4u; e++) {
    if (d + e < dim) {
      dq[row * dim + d + e] = y[e];
    }
  }
#endif
}
fn store_dkv(row: u32, d: u32, dim: u32, y: vec4<f32>) {
#if VEC4
  dkv[row * (dim / 4u) + d / 4u] = y;
#else
  for (var e = 0u; e < 4u; e++) {
    if (d + e < dim) {
      dkv[row * dim + d + e] = y[e];
    }
  }
#endif
}

// Vec4 e of a tile of rows first .. first + valid - 1 of head `head` (of `heads`), row e / (DP /
// 4): of k (second: v) when kv, else of q (second: dout); zeros from row `valid` on. f32, held in
// registers and converted when stored, so that nothing waits for the load.
fn fetch_one(kv: bool, second: bool, first: u32, valid: u32, head: u32, heads: u32, dim: u32, e: u32) -> vec4<f32> {
  let row = e / (DP / 4u);
  if (e >= BT * DP / 4u || row >= valid) {
    return vec4<f32>(0.0);
  }
  let at = (first + row) * heads + head;
  let c = e % (DP / 4u);
  if (kv) {
    if (second) {
      return load_v(at, c, dim);
    }
    return load_k(at, c, dim);
  }
  if (second) {
    return load_do(at, c, dim);
  }
  return load_q(at, c, dim);
}

// (lse, delta) of tile row lid (lid < BT) of rows first .. first + valid - 1 of head `head`;
// (EMPTY_LSE, 0) past them and for a non-finite lse (an empty row's -inf, NaN).
fn fetch_stats(first: u32, valid: u32, head: u32, heads: u32, lid: u32) -> vec2<f32> {
  var r = vec2<f32>(EMPTY_LSE, 0.0);
  if (lid < valid && lid < BT) {
    let at = (first + lid) * heads + head;
    let x = stats[at];
    r = vec2<f32>(select(EMPTY_LSE, x, abs(x) < 3.0e38), stats[params.total_q * heads + at]);
  }
  return r;
}

// Vec4 e of the tile (a of role 0, b of role 1, fetched by fetch_one) into tile buffer `buf`.
fn put_one(buf: u32, e: u32, a: vec4<f32>, b: vec4<f32>) {
  if (e < BT * DP / 4u) {
    let row = e / (DP / 4u);
    let d = (e % (DP / 4u)) * 4u;
    let frag = (row / S) * MAX_DC + d / S;
    let at = (row % S) * P4 + (d % S) / 4u;
    tt[buf * 2u][frag][at] = vec4<f16>(a);
    tt[buf * 2u + 1u][frag][at] = vec4<f16>(b);
  }
}

// Tile row lid's (lse, delta) into buffer `buf`'s stats.
fn put_stats(buf: u32, lid: u32, x: vec2<f32>) {
  if (lid < BT) {
    let r = buf * BT + lid;
    lse_t[r / 4u][r % 4u] = x.x;
    delta_t[r / 4u][r % 4u] = x.y;
  }
}

// (P, dS * scale) of 4 (query, key) pairs from their raw dot products, zero where not `vis`;
// `bias` (ALiBi's, 0 without) joins the score after softcap, whose slope stays the uncapped score's.
fn grads4(s0: vec4<f32>, dp: vec4<f32>, lse: vec4<f32>, delta: vec4<f32>, vis: vec4<bool>, bias: vec4<f32>) -> array<vec4<f32>, 2> {
  let scale = params.scale;
  let cap = params.softcap;
  let x = s0 * scale;
  var s = x;
  var slope = vec4<f32>(1.0);
  if (cap > 0.0) {
    s = vec4<f32>(softcap_apply(x.x, cap), softcap_apply(x.y, cap), softcap_apply(x.z, cap), softcap_apply(x.w, cap));
    slope = vec4<f32>(softcap_slope(x.x, cap), softcap_slope(x.y, cap), softcap_slope(x.z, cap), softcap_slope(x.w, cap));
  }
  let p = select(vec4<f32>(0.0), exp2((s + bias - lse) * LOG2E), vis);
  return array<vec4<f32>, 2>(p, p * (dp - delta) * (slope * scale));
}

// Whether query rows i see key(s) j (both within their sequence).
fn visible4(i: vec4<i32>, j: vec4<i32>, len_q: i32, len_k: i32, offset: i32, wl: i32, wr: i32) -> vec4<bool> {
  let lo = (i + vec4<i32>(offset - wl)) <= j;
  let hi = j <= (i + vec4<i32>(offset + wr));
  return (i < vec4<i32>(len_q)) & (j < vec4<i32>(len_k)) & (lo | vec4<bool>(wl < 0)) & (hi | vec4<bool>(wr < 0));
}

// Whether every query row of [i0, i1] sees every key of [j0, j1] (a tile off every mask edge).
fn all_visible(i0: i32, i1: i32, j0: i32, j1: i32, len_q: i32, len_k: i32, offset: i32, wl: i32, wr: i32) -> bool {
  return i1 < len_q && j1 < len_k && (wl < 0 || j0 >= i1 + offset - wl) && (wr < 0 || j1 <= i0 + offset + wr);
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
#if VEC4
  for (var c = 0u; c < dim / 4u; c++) {
    acc += out[e * (dim / 4u) + c] * dout[e * (dim / 4u) + c];
  }
#else
  var d = 0u;
  for (; d + 4u <= dim; d += 4u) {
    let o = vec4<f32>(out[e * dim + d], out[e * dim + d + 1u], out[e * dim + d + 2u], out[e * dim + d + 3u]);
    let g = vec4<f32>(dout[e * dim + d], dout[e * dim + d + 1u], dout[e * dim + d + 2u], dout[e * dim + d + 3u]);
    acc += o * g;
  }
  for (; d < dim; d++) {
    acc.x += out[e * dim + d] * dout[e * dim + d];
  }
#endif
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
  let blk = w / (hkv * nb);  // key block 0 first: the one most query rows see under a causal mask
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
  let alibi = params.alibi_on != 0u;
  var qlo = 0;  // the query rows any key of the block sees: [qlo, qhi)
  var qhi = len_q;
  if (wr >= 0) {
    qlo = max(qlo, j0 - offset - wr);
  }
  if (wl >= 0) {
    qhi = min(qhi, j_last - offset + wl + 1);
  }
  let sg = lid / sg_size;
  let fb = sg / DS;  // this subgroup's row block; its role is `part` (DS = 2) or both (DS = 1)
  let part = sg % DS;
  let mx = sg < RB * DS;  // has matrix work

  // K (role 0) and V (role 1) of the block, left fragments (keys x dims), staged through buffer 0
  // in chunks of BT keys: x{r}_{c} is role part + r's chunk c.
#for r NR
#for c MAX_DC
  var x{r}_{c}: LF;
#endfor
#endfor
  for (var ch = 0u; ch < (RB + NT - 1u) / NT; ch++) {
    let first = j0 + i32(ch * BT);
    let valid = u32(max(0, min(i32(BT), len_k - first)));
#for f MAX_PF
    put_one(0u, lid + WG * {f}u, fetch_one(true, false, u32(k_start + first), valid, g, hkv, dim, lid + WG * {f}u),
            fetch_one(true, true, u32(k_start + first), valid, g, hkv, dim, lid + WG * {f}u));
#endfor
    workgroupBarrier();
    if (mx && fb / NT == ch) {
#for r NR
#for c MAX_DC
      x{r}_{c} = subgroupMatrixLoad<LF, row_major>(&tt[part + {r}u][(fb % NT) * MAX_DC + {c}u], 0u, P4);
#endfor
#endfor
    }
    workgroupBarrier();
  }

  // y{r}_{c}: role part + r's accumulator (role 0 dK, role 1 dV) of row block fb, chunk c.
#for r NR
#for c MAX_DC
  var y{r}_{c} = AF();
#endfor
#endfor
  // Tiles it = 0 .. grp * ntile - 1: head g * grp + it / ntile, query rows from qlo + (it % ntile) * BT.
  let ntile = u32(max(0, qhi - qlo + i32(BT) - 1)) / BT;
  let tiles = grp * ntile;
  let valid0 = u32(max(0, min(i32(BT), len_q - qlo)));
#for f MAX_PF
  var a{f} = fetch_one(false, false, u32(q_start + qlo), valid0, g * grp, hq, dim, lid + WG * {f}u);
  var b{f} = fetch_one(false, true, u32(q_start + qlo), valid0, g * grp, hq, dim, lid + WG * {f}u);
#endfor
  var st = fetch_stats(u32(q_start + qlo), valid0, g * grp, hq, lid);
  for (var it = 0u; it < tiles; it++) {
    let buf = it % NB;
    let t0 = qlo + i32((it % ntile) * BT);
    let n1 = it + 1u;  // the next tile, in flight while this one is computed
    let t1 = qlo + i32((n1 % ntile) * BT);
    let v1 = select(0u, u32(max(0, min(i32(BT), len_q - t1))), n1 < tiles);
    let h1 = g * grp + min(n1 / ntile, grp - 1u);
#for f MAX_PF
    put_one(buf, lid + WG * {f}u, a{f}, b{f});
    a{f} = fetch_one(false, false, u32(q_start + t1), v1, h1, hq, dim, lid + WG * {f}u);
    b{f} = fetch_one(false, true, u32(q_start + t1), v1, h1, hq, dim, lid + WG * {f}u);
#endfor
    put_stats(buf, lid, st);
    st = fetch_stats(u32(q_start + t1), v1, h1, hq, lid);
    workgroupBarrier();  // the tile is staged

    // Sᵀ = K Qᵀ (role 0), dPᵀ = V doutᵀ (role 1): keys x query rows.
    if (mx) {
#for r NR
#for n NT
      {
        var s = AF();
#for c MAX_DC
        s = subgroupMatrixMultiplyAccumulate(x{r}_{c}, subgroupMatrixLoad<RF, col_major>(&tt[buf * 2u + part + {r}u][{n}u * MAX_DC + {c}u], 0u, P4), s);
#endfor
        subgroupMatrixStore<row_major>(&rs[(part + {r}u) * RB + fb][{n}u], 0u, s, F4);
      }
#endfor
#endfor
    }
    workgroupBarrier();  // Sᵀ and dPᵀ are in workgroup memory

    // Pᵀ and dSᵀ * scale (f16), elementwise: key jj of the block, query rows tr .. tr + 3.
    let full = all_visible(t0, t0 + i32(BT) - 1, j0, j0 + i32(BF) - 1, len_q, len_k, offset, wl, wr);
    let slope = alibi_slope(g * grp + it / ntile);  // the tile's query head (0 without ALiBi)
#for u MAX_EW
    {
      let e = lid + WG * {u}u;
      if (e < BF * BT / 4u) {
        let jj = bank_row(e / (BT / 4u), BT / 4u);
        let tr = (e % (BT / 4u)) * 4u;
        let a32 = (jj % S) * F4 + (tr % S) / 4u;
        let i = vec4<i32>(t0 + i32(tr)) + vec4<i32>(0, 1, 2, 3);
        let j = vec4<i32>(j0 + i32(jj));
        var vis = vec4<bool>(true);
        if (!full) {
          vis = visible4(i, j, len_q, len_k, offset, wl, wr);
        }
        var bias = vec4<f32>(0.0);  // not a mask: also on full tiles
        if (alibi) {
          bias = -slope * vec4<f32>(abs(j - (i + vec4<i32>(offset))));  // i32 difference first
        }
        let at = (buf * BT + tr) / 4u;
        let gr = grads4(rs[jj / S][tr / S][a32], rs[RB + jj / S][tr / S][a32], lse_t[at], delta_t[at], vis, bias);
        let a16 = (jj % S) * P4 + (tr % S) / 4u;
        pp[jj / S][tr / S][a16] = vec4<f16>(gr[1]);
        pp[RB + jj / S][tr / S][a16] = vec4<f16>(gr[0]);
      }
    }
#endfor
    workgroupBarrier();  // Pᵀ and dSᵀ are in workgroup memory

    // dK += dSᵀ Q (role 0), dV += Pᵀ dout (role 1), every head-dim chunk.
    if (mx) {
#for r NR
#for kk NT
      {
        let a = subgroupMatrixLoad<LF, row_major>(&pp[(part + {r}u) * RB + fb][{kk}u], 0u, P4);
#for c MAX_DC
        y{r}_{c} = subgroupMatrixMultiplyAccumulate(a, subgroupMatrixLoad<RF, row_major>(&tt[buf * 2u + part + {r}u][{kk}u * MAX_DC + {c}u], 0u, P4), y{r}_{c});
#endfor
      }
#endfor
#endfor
    }
    if (NB == 1u) {
      workgroupBarrier();  // the tile buffer is read; with two, the next tile goes to the other
    }
  }
  if (NB > 1u) {
    workgroupBarrier();  // rs is free for the output
  }

  // dk (role 0) and dv (role 1) through rs in chunks of NT head-dim fragments.
  let tk = params.total_k;
  for (var ch = 0u; ch < (MAX_DC + NT - 1u) / NT; ch++) {
    if (mx) {
#for r NR
#for c MAX_DC
      if ({c}u / NT == ch) {
        subgroupMatrixStore<row_major>(&rs[(part + {r}u) * RB + fb][{c}u % NT], 0u, y{r}_{c}, F4);
      }
#endfor
#endfor
    }
    workgroupBarrier();
    for (var e = lid; e < 2u * BF * BT / 4u; e += WG) {
      let which = e / (BF * BT / 4u);  // the role: dk or dv
      let jj = (e / (BT / 4u)) % BF;
      let col = (e % (BT / 4u)) * 4u;
      let d = ch * BT + col;
      if (j0 + i32(jj) <= j_last && d < dim) {
        let y = rs[which * RB + jj / S][col / S][(jj % S) * F4 + (col % S) / 4u];
        store_dkv(which * tk * hkv + u32(k_start + j0 + i32(jj)) * hkv + g, d, dim, y);
      }
    }
    workgroupBarrier();
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
  let blocks = (params.max_seqlen + BF - 1u) / BF;
  let from_end = w / (hq * nb);
  if (from_end >= blocks) {
    return;
  }
  let blk = blocks - 1u - from_end;  // the last query rows first: the ones a causal mask lets see most keys
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
  let alibi = params.alibi_on != 0u;
  let slope = alibi_slope(h);  // 0 without ALiBi
  let band = visible_keys(row0, row_last, offset, len_k, wl, wr);
  let sg = lid / sg_size;
  let fb = sg / DS;
  let part = sg % DS;
  let mx = sg < RB * DS;

  // Q (role 0) and dout (role 1) of the block, left fragments (rows x dims), through buffer 0:
  // x{r}_{c} is role part + r's chunk c.
#for r NR
#for c MAX_DC
  var x{r}_{c}: LF;
#endfor
#endfor
  for (var ch = 0u; ch < (RB + NT - 1u) / NT; ch++) {
    let first = row0 + i32(ch * BT);
    let valid = u32(max(0, min(i32(BT), len_q - first)));
#for f MAX_PF
    put_one(0u, lid + WG * {f}u, fetch_one(false, false, u32(q_start + first), valid, h, hq, dim, lid + WG * {f}u),
            fetch_one(false, true, u32(q_start + first), valid, h, hq, dim, lid + WG * {f}u));
#endfor
    workgroupBarrier();
    if (mx && fb / NT == ch) {
#for r NR
#for c MAX_DC
      x{r}_{c} = subgroupMatrixLoad<LF, row_major>(&tt[part + {r}u][(fb % NT) * MAX_DC + {c}u], 0u, P4);
#endfor
#endfor
    }
    workgroupBarrier();
  }
  // lse and delta of the block's rows (EMPTY_LSE for a non-finite lse and past the rows).
  let tq = params.total_q;
  for (var e = lid; e < BF; e += WG) {
    var l = EMPTY_LSE;
    var dl = 0.0;
    if (row0 + i32(e) <= row_last) {
      let at = u32(q_start + row0 + i32(e)) * hq + h;
      let x = stats[at];
      l = select(EMPTY_LSE, x, abs(x) < 3.0e38);
      dl = stats[tq * hq + at];
    }
    lse_t[e / 4u][e % 4u] = l;
    delta_t[e / 4u][e % 4u] = dl;
  }

  // y{cl}: head-dim chunk part * DCS + cl of the block's dQ.
#for cl DCS
  var y{cl} = AF();
#endfor
  let valid0 = u32(max(0, min(i32(BT), len_k - band.x)));
#for f MAX_PF
  var a{f} = fetch_one(true, false, u32(k_start + band.x), valid0, kvh, hkv, dim, lid + WG * {f}u);
  var b{f} = fetch_one(true, true, u32(k_start + band.x), valid0, kvh, hkv, dim, lid + WG * {f}u);
#endfor
  var it = 0u;
  for (var t0 = band.x; t0 < band.y; t0 += i32(BT)) {
    let buf = it % NB;
    it++;
    let t1 = t0 + i32(BT);
    let v1 = select(0u, u32(max(0, min(i32(BT), len_k - t1))), t1 < band.y);
#for f MAX_PF
    put_one(buf, lid + WG * {f}u, a{f}, b{f});
    a{f} = fetch_one(true, false, u32(k_start + t1), v1, kvh, hkv, dim, lid + WG * {f}u);
    b{f} = fetch_one(true, true, u32(k_start + t1), v1, kvh, hkv, dim, lid + WG * {f}u);
#endfor
    workgroupBarrier();  // the tile is staged

    // S = Q Kᵀ (role 0), dP = dout Vᵀ (role 1): query rows x keys.
    if (mx) {
#for r NR
#for n NT
      {
        var s = AF();
#for c MAX_DC
        s = subgroupMatrixMultiplyAccumulate(x{r}_{c}, subgroupMatrixLoad<RF, col_major>(&tt[buf * 2u + part + {r}u][{n}u * MAX_DC + {c}u], 0u, P4), s);
#endfor
        subgroupMatrixStore<row_major>(&rs[(part + {r}u) * RB + fb][{n}u], 0u, s, F4);
      }
#endfor
#endfor
    }
    workgroupBarrier();  // S and dP are in workgroup memory

    // dS * scale (f16), elementwise: query row ii of the block, keys tr .. tr + 3.
    let full = all_visible(row0, row0 + i32(BF) - 1, t0, t0 + i32(BT) - 1, len_q, len_k, offset, wl, wr);
#for u MAX_EW
    {
      let e = lid + WG * {u}u;
      if (e < BF * BT / 4u) {
        let ii = bank_row(e / (BT / 4u), BT / 4u);
        let tr = (e % (BT / 4u)) * 4u;
        let a32 = (ii % S) * F4 + (tr % S) / 4u;
        let i = vec4<i32>(row0 + i32(ii));
        let j = vec4<i32>(t0 + i32(tr)) + vec4<i32>(0, 1, 2, 3);
        var vis = vec4<bool>(true);
        if (!full) {
          vis = visible4(i, j, len_q, len_k, offset, wl, wr);
        }
        var bias = vec4<f32>(0.0);  // not a mask: also on full tiles
        if (alibi) {
          bias = -slope * vec4<f32>(abs(j - (i + vec4<i32>(offset))));  // i32 difference first
        }
        let gr = grads4(rs[ii / S][tr / S][a32], rs[RB + ii / S][tr / S][a32], vec4<f32>(lse_t[ii / 4u][ii % 4u]),
                        vec4<f32>(delta_t[ii / 4u][ii % 4u]), vis, bias);
        pp[ii / S][tr / S][(ii % S) * P4 + (tr % S) / 4u] = vec4<f16>(gr[1]);
      }
    }
#endfor
    workgroupBarrier();  // dS is in workgroup memory

    // dQ += dS K over this subgroup's head-dim chunks.
    if (mx) {
#for kk NT
      {
        let ds = subgroupMatrixLoad<LF, row_major>(&pp[fb][{kk}u], 0u, P4);
#for cl DCS
        y{cl} = subgroupMatrixMultiplyAccumulate(ds, subgroupMatrixLoad<RF, row_major>(&tt[buf * 2u][{kk}u * MAX_DC + part * DCS + {cl}u], 0u, P4), y{cl});
#endfor
      }
#endfor
    }
    if (NB == 1u) {
      workgroupBarrier();  // the tile buffer is read; with two, the next tile goes to the other
    }
  }
  if (NB > 1u) {
    workgroupBarrier();  // rs is free for the output
  }

  // dq through rs in chunks of NT head-dim fragments.
  for (var ch = 0u; ch < (MAX_DC + NT - 1u) / NT; ch++) {
    if (mx) {
#for cl DCS
      if ((part * DCS + {cl}u) / NT == ch) {
        subgroupMatrixStore<row_major>(&rs[fb][(part * DCS + {cl}u) % NT], 0u, y{cl}, F4);
      }
#endfor
    }
    workgroupBarrier();
    for (var e = lid; e < BF * BT / 4u; e += WG) {
      let ii = e / (BT / 4u);
      let col = (e % (BT / 4u)) * 4u;
      let d = ch * BT + col;
      if (row0 + i32(ii) <= row_last && d < dim) {
        let y = rs[ii / S][col / S][(ii % S) * F4 + (col % S) / 4u];
        store_dq(u32(q_start + row0 + i32(ii)) * hq + h, d, dim, y);
      }
    }
    workgroupBarrier();
  }
}
