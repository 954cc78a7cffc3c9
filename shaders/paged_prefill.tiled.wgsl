// paged_prefill.tiled (and paged_prefill.tiled_f16, define F16): new tokens of each sequence (any
// number: chunked prefill) against a paged KV cache, FlashAttention-2 style on plain arithmetic
// (every adapter: wgpu-py, SwiftShader), with register-blocked micro-tiles as flash_fwd.blocked's.
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
// (BS = block_size); seq_lens [B] i32; head_params [Hq] (ALiBi slope, sink) f32 (zero slopes when
// ALiBi is off: they add exactly nothing); lse [B, Sq_new, Hq].
//
// Work split: one workgroup of WG invocations per (block of BR new tokens, sequence, query head),
// heads fastest (the query heads of one kv head read the same cache blocks side by side), the
// blocks of the last new tokens (which see the most keys) first. Invocation t is row group
// rg = t % RG (RG = BR / 4) and column group cg = t / RG (NCG = WG / RG groups); it owns the four
// rows rg + RG * m (m < 4): scores of TN keys of each BC-key tile (keys cg + NCG * n) and the
// output's vec4 columns cg + NCG * i of each head-dim chunk.
// Head-dim chunks: the head dim is DCH vec4 columns a chunk, NCH chunks, so that a tile's K (and
// V) staged in workgroup memory is BC x DCH whatever the head dim (D = 512 fits where a whole row
// would not). Scores sum over the chunks, each staged in turn; with one chunk Q is staged once
// for the whole kernel, with several each Q chunk is staged again beside its K chunk. The K and
// V of a tile are gathered through the block table as they are staged: each key's block is
// looked up, its slot read.
// Per tile: [Q chunk,] K chunk staged | barrier | partial scores | barrier (for each chunk) ->
// softcap, ALiBi, mask, each row's tile max shared | barrier | online softmax, P staged; then per
// chunk: V chunk staged | barrier | O += P V | barrier.
// Exponentials are exp2 of differences times log2(e), each difference clamped at -1000 first so
// that no infinity is ever formed (paged_decode.split's rule). The sink joins at the end:
// M = max(m, sink), z = l * exp(m - M) + exp(sink - M), out = o * exp(m - M) / z, lse = M + log z.
// Every index is guarded in this code, given sizes wgattn.interfaces.paged_prefill validated
// (block-table entries a sequence uses in range, u32 element indices): an invalid block reads as
// zeros, lengths are clamped to what the block table addresses.
// F16: the cache is f16 and Q, K and V are staged as f16 (half the workgroup memory); arithmetic
// is f32.
// Reference: wgattn.reference.decode_attention.
#include "interfaces/paged_prefill.wgsl"
#include "lib/varlen.wgsl"
#include "lib/softcap.wgsl"

override WG: u32;    // invocations per workgroup (= RG * NCG)
override BR: u32;    // new tokens (query rows) per workgroup, a multiple of 4
override BC: u32;    // keys per tile (a multiple of NCG)
override RG: u32;    // row groups: BR / 4
override NCG: u32;   // column groups: WG / RG
override TN: u32;    // keys per invocation per tile: BC / NCG, at most MAX_TN
override D4: u32;    // vec4 columns of a head row: ceil(head_dim / 4)
override DCH: u32;   // vec4 columns of a head-dim chunk
override NCH: u32;   // chunks: ceil(D4 / DCH)
override QS: u32;    // vec4 stride of a staged q row: DCH rounded up to an odd number (no bank conflicts)
override CPC: u32;   // vec4 output columns per invocation per chunk: ceil(DCH / NCG), at most MAX_CPC
override OC: u32;    // vec4 output columns per invocation and row: NCH * CPC, at most MAX_OC
override KS: u32;    // vec4 stride of a staged k/v row: NCG * CPC (>= DCH; zeros past it)
override BS: u32;    // tokens per cache block: a constant, so that j / BS and j % BS compile to
                     // multiplies and shifts (one pipeline per block size, which a model fixes);
                     // wgattn.interfaces.paged_prefill sets it with the tile
const MAX_TN: u32 = 8u;
const MAX_CPC: u32 = 8u;
const MAX_OC: u32 = 32u;  // head_dim 512 with 4 column groups (a CPU tile)
const NONE: u32 = 0xffffffffu;  // a key with no row in the cache: past the band, or its block invalid
const LOWEST: f32 = -3.4028234663852886e38;  // stands for -inf: "no score"
const LOG2E: f32 = 1.4426950408889634;

var<workgroup> q_tile: array<vec4<T>, BR * QS>;    // the block's q rows (a chunk of them), pre-scaled
var<workgroup> kv_tile: array<vec4<T>, BC * KS>;   // the tile's K chunk, then its V chunk
var<workgroup> p_tile: array<vec4<f32>, BC * RG>;  // [key][row group]: the 4 rows' probabilities
var<workgroup> partial: array<f32, NCG * BR>;      // [column group][row]: partial maxima / sums

// exp(d) for d <= 0, through exp2; d is clamped so that no infinity is formed.
fn exp_le0(d: f32) -> f32 {
  return exp2(max(d, -1000.0) * LOG2E);
}

// Vec4 column c of row `row` (token-major: (b * Sq_new + i) * Hq + h) of q, zeros past head_dim.
#if VEC4
fn load_q(row: u32, c: u32, dim: u32) -> vec4<f32> {
  return q[row * (dim / 4u) + c];
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
#endif

// Vec4 column c of cache row `row` (= (block * BS + slot) * Hkv + g) of K or V (from_v), zeros past
// head_dim.
#if VEC4
fn load_cache(from_v: bool, row: u32, c: u32, dim: u32) -> vec4<T> {
  if (from_v) {
    return v_cache[row * (dim / 4u) + c];
  }
  return k_cache[row * (dim / 4u) + c];
}
#else
fn load_cache(from_v: bool, row: u32, c: u32, dim: u32) -> vec4<T> {
  var x = vec4<T>(0.0);
  for (var e = 0u; e < 4u; e++) {
    let d = c * 4u + e;
    if (d < dim) {
      if (from_v) {
        x[e] = v_cache[row * dim + d];
      } else {
        x[e] = k_cache[row * dim + d];
      }
    }
  }
  return x;
}
#endif

// The cache row of key j of sequence b in kv head g, through the block table; NONE for an
// entry out of range (refused before dispatch; guarded all the same).
fn cache_row(b: u32, j: u32, g: u32) -> u32 {
  let blk = block_table[b * params.max_blocks + j / BS];
  if (blk < 0 || u32(blk) >= params.num_blocks) {
    return NONE;
  }
  return (u32(blk) * BS + j % BS) * params.heads_kv + g;
}

// Stage head-dim chunk ch of K or V (from_v) for the keys t0 .. t0 + BC (zeros past `hi`, past
// the chunk and past head_dim) into kv_tile, each key looked up through the block table.
fn stage_kv(from_v: bool, lid: u32, b: u32, g: u32, t0: u32, hi: u32, ch: u32) {
  let dim = params.head_dim;
  for (var e = lid; e < BC * KS; e += WG) {
    let j = t0 + e / KS;
    let c = e % KS;
    let col = ch * DCH + c;
    var x = vec4<T>(0.0);
    if (j < hi && c < DCH && col < D4) {
      let row = cache_row(b, j, g);
      if (row != NONE) {
        x = load_cache(from_v, row, col, dim);
      }
    }
    kv_tile[e] = x;
  }
}

// Stage head-dim chunk ch of the block's q rows, pre-scaled (softcap, when on, applies to the
// scaled score); rows past the new tokens are zeros.
fn stage_q(lid: u32, q_row0: u32, nrows: u32, hq: u32, ch: u32) {
  for (var e = lid; e < BR * QS; e += WG) {
    let r = e / QS;
    let col = ch * DCH + e % QS;
    var x = vec4<f32>(0.0);
    if (r < nrows && e % QS < DCH && col < D4) {
      x = load_q(q_row0 + r * hq, col, params.head_dim) * params.scale;
    }
    q_tile[e] = vec4<T>(x);
  }
}

@compute @workgroup_size(WG)
fn prefill(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
  // Everything up to the tile loop depends only on the workgroup: returns here are uniform.
  let w = wid.x + wid.y * nwg.x;
  let hq = params.heads_q;
  let nb = params.batch_size;
  let sq = params.new_tokens;
  let blocks = (sq + BR - 1u) / BR;
  if (nb == 0u || w >= hq * nb * blocks) {
    return;  // the spare workgroups of a grid folded into two dimensions
  }
  let h = w % hq;
  let b = (w / hq) % nb;
  let block = blocks - 1u - w / (hq * nb);  // the last new tokens, which see the most keys, first
  let g = h / (hq / params.heads_kv);
  let i0 = block * BR;
  let nrows = min(BR, sq - i0);
  // Tokens in the cache, at most what the block table addresses; fewer than Sq_new (an idle
  // slot holds 0) means nothing is visible.
  let n = min(u32(max(seq_lens[b], 0)), params.max_blocks * BS);
  let live = n >= sq;
  let wl = params.window_left;
  // Keys any row of the block sees, [lo, hi): the first row's window start to the last row's key.
  var lo = 0u;
  var hi = 0u;
  if (live) {
    let pos_first = n - sq + i0;
    hi = n - sq + i0 + nrows;
    if (wl >= 0) {
      lo = pos_first - min(pos_first, u32(wl));
    }
  }

  let rg = lid % RG;
  let cg = lid / RG;
  // This invocation's rows rg + RG * m: position, visible keys [row_lo, row_hi) (empty for rows
  // past the new tokens or of an idle slot).
  let r4 = vec4<u32>(rg) + RG * vec4<u32>(0u, 1u, 2u, 3u);
  let row_ok = vec4<bool>(live) & (r4 < vec4<u32>(nrows));
  let row_pos = vec4<i32>(vec4<u32>(n - select(0u, sq, live) + i0) + r4);
  let row_hi = select(vec4<i32>(0), row_pos + 1, row_ok);
  var row_lo = vec4<i32>(0);
  if (wl >= 0) {
    row_lo = max(row_lo, row_pos - wl);
  }
  let slope = head_params[h].x;
  let q_row0 = (b * sq + i0) * hq + h;  // q's row of the block's first new token

  if (NCH == 1u) {
    stage_q(lid, q_row0, nrows, hq, 0u);  // staged once: every tile's chunk
  }

  let cap = params.softcap;
  var m = vec4<f32>(LOWEST);  // running max of the four rows' scores
  var l = vec4<f32>(0.0);     // partial row sums over this invocation's keys
  var o: array<array<vec4<f32>, MAX_OC>, 4>;
  for (var mm = 0u; mm < 4u; mm++) {
    for (var i = 0u; i < min(OC, MAX_OC); i++) {
      o[mm][i] = vec4<f32>(0.0);
    }
  }

  for (var t0 = lo; t0 < hi; t0 += BC) {
    // Scores: s[nn][mm] for key cg + NCG * nn and row rg + RG * mm, summed over the chunks.
    var s: array<vec4<f32>, MAX_TN>;
    for (var nn = 0u; nn < min(TN, MAX_TN); nn++) {
      s[nn] = vec4<f32>(0.0);
    }
    for (var ch = 0u; ch < NCH; ch++) {
      if (NCH > 1u) {
        stage_q(lid, q_row0, nrows, hq, ch);
      }
      stage_kv(false, lid, b, g, t0, hi, ch);
      workgroupBarrier();  // Q and K of the chunk are staged
      for (var c = 0u; c < DCH; c++) {
        let q0 = vec4<f32>(q_tile[rg * QS + c]);
        let q1 = vec4<f32>(q_tile[(rg + RG) * QS + c]);
        let q2 = vec4<f32>(q_tile[(rg + 2u * RG) * QS + c]);
        let q3 = vec4<f32>(q_tile[(rg + 3u * RG) * QS + c]);
        for (var nn = 0u; nn < min(TN, MAX_TN); nn++) {
          let kk = vec4<f32>(kv_tile[(cg + NCG * nn) * KS + c]);
          s[nn] += vec4<f32>(dot(q0, kk), dot(q1, kk), dot(q2, kk), dot(q3, kk));
        }
      }
      workgroupBarrier();  // the chunk is no longer read
    }
    var tile_max = vec4<f32>(LOWEST);
    for (var nn = 0u; nn < min(TN, MAX_TN); nn++) {
      var x = s[nn];
      if (cap > 0.0) {
        x = vec4<f32>(softcap_apply(x.x, cap), softcap_apply(x.y, cap), softcap_apply(x.z, cap),
                      softcap_apply(x.w, cap));
      }
      let j = vec4<i32>(i32(t0 + cg + NCG * nn));
      x += slope * vec4<f32>(j - row_pos);
      x = select(vec4<f32>(LOWEST), x, (j >= row_lo) & (j < row_hi));
      s[nn] = x;
      tile_max = max(tile_max, x);
    }
    for (var mm = 0u; mm < 4u; mm++) {
      partial[cg * BR + rg + mm * RG] = tile_max[mm];
    }
    workgroupBarrier();  // the partial maxima are written

    var row_max = m;
    for (var cc = 0u; cc < NCG; cc++) {
      let at = cc * BR + rg;
      row_max = max(row_max, vec4<f32>(partial[at], partial[at + RG], partial[at + 2u * RG], partial[at + 3u * RG]));
    }
    // A row with nothing seen yet keeps LOWEST: its weights are 0, and alpha scales zeros.
    let alpha = vec4<f32>(exp_le0(m.x - row_max.x), exp_le0(m.y - row_max.y), exp_le0(m.z - row_max.z),
                          exp_le0(m.w - row_max.w));
    m = row_max;
    l *= alpha;
    for (var nn = 0u; nn < min(TN, MAX_TN); nn++) {
      let x = s[nn];
      let d = x - row_max;
      let e = vec4<f32>(exp_le0(d.x), exp_le0(d.y), exp_le0(d.z), exp_le0(d.w));
      let p = select(vec4<f32>(0.0), e, x > vec4<f32>(LOWEST));
      l += p;
      p_tile[(cg + NCG * nn) * RG + rg] = p;
    }
    for (var mm = 0u; mm < 4u; mm++) {
      for (var i = 0u; i < min(OC, MAX_OC); i++) {
        o[mm][i] *= alpha[mm];
      }
    }

    // O += P V, a chunk of V at a time; the first barrier also publishes P.
    for (var ch = 0u; ch < NCH; ch++) {
      stage_kv(true, lid, b, g, t0, hi, ch);
      workgroupBarrier();  // V of the chunk (and P) are staged
      for (var jj = 0u; jj < BC; jj++) {
        let p = p_tile[jj * RG + rg];
        for (var i = 0u; i < min(CPC, MAX_CPC); i++) {
          let vv = vec4<f32>(kv_tile[jj * KS + cg + NCG * i]);
          let at = ch * CPC + i;
          o[0][at] += p.x * vv;
          o[1][at] += p.y * vv;
          o[2][at] += p.z * vv;
          o[3][at] += p.w * vv;
        }
      }
      workgroupBarrier();  // V and P are no longer read
    }
  }

  // Row sums: the NCG partial sums of each row, through workgroup memory.
  for (var mm = 0u; mm < 4u; mm++) {
    partial[cg * BR + rg + mm * RG] = l[mm];
  }
  workgroupBarrier();
  var total = vec4<f32>(0.0);
  for (var cc = 0u; cc < NCG; cc++) {
    let at = cc * BR + rg;
    total += vec4<f32>(partial[at], partial[at + RG], partial[at + 2u * RG], partial[at + 3u * RG]);
  }
  let sinks_on = params.sinks_on != 0u;
  let sink = select(0.0, head_params[h].y, sinks_on);
  let dim = params.head_dim;
  for (var mm = 0u; mm < 4u; mm++) {
    if (rg + RG * mm >= nrows) {
      continue;
    }
    let seen = total[mm] > 0.0;  // z >= 1 then (the term at the max is 1)
    var top = select(LOWEST, m[mm], seen);
    if (sinks_on) {
      top = max(top, sink);
    }
    let f = select(0.0, exp_le0(m[mm] - top), seen);
    var z = total[mm] * f;
    if (sinks_on) {
      z += exp_le0(sink - top);
    }
    let inv = select(0.0, f / z, seen);
    let row = q_row0 + (rg + RG * mm) * hq;
    for (var ch = 0u; ch < NCH; ch++) {
      for (var i = 0u; i < min(CPC, MAX_CPC); i++) {
        let c = cg + NCG * i;
        let col = ch * DCH + c;
        if (c >= DCH || col >= D4) {
          continue;
        }
        let x = o[mm][ch * CPC + i] * inv;
#if VEC4
        out[row * D4 + col] = x;
#else
        for (var e = 0u; e < 4u; e++) {
          let d = col * 4u + e;
          if (d < dim) {
            out[row * dim + d] = x[e];
          }
        }
#endif
      }
    }
    if (cg == 0u) {
      lse[row] = select(neg_inf(), top + log(z), z > 0.0);
    }
  }
}
