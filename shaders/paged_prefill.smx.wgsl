// paged_prefill.smx (and paged_prefill.smx_f16, define F16): new tokens of each sequence (any number:
// chunked prefill) against a paged KV cache on subgroup matrices (tensor cores where the adapter has
// them): flash_fwd.smx's design with its K/V tiles gathered through the block table, ALiBi and
// sinks in the online softmax, and head-dim chunks for head dims whose tiles would not fit.
//
//   Sequence b holds n = seq_lens[b] tokens in the cache, its Sq_new new ones last; new token i
//   sits at pos = n - Sq_new + i. Query head h reads kv head g = h / (heads_q / heads_kv) and sees
//   key j when j <= pos and (window_left < 0 or j >= pos - window_left):
//     s_j = scale * q . k_j;  s_j = softcap * tanh(s_j / softcap) if softcap > 0;
//     s_j += slope[h] * (j - pos)
//     z = sum_j exp(s_j) (+ exp(sink[h]) with sinks on);  out = sum_j exp(s_j) / z * v_j;  lse = log z
//   A row with nothing visible and no sink (an idle slot, n = 0) gets out = 0 and lse = -inf.
//
// Layout: q, out [B, Sq_new, Hq, D] f32; k_cache, v_cache [num_blocks, block_size, Hkv, D], f32
// (converted to f16 as it is staged) or (F16) f16 (read as it is), key j of sequence b in block
// block_table[b * max_blocks + j / BS] at slot j % BS (BS = block_size); seq_lens [B] i32;
// head_params [Hq] (ALiBi slope, sink) f32; lse [B, Sq_new, Hq]. q and the cache are rounded to
// f16 as they are staged (the kernel is judged by the f16 rule: f16-rounded inputs against the
// float64 reference, a naive float16 run the yardstick).
//
// Matrix shapes (flash_fwd.smx's): the adapter's subgroupMatrixConfigs decide M x N x K (the
// defines SMX_M16 / SMX_N16 / SMX_K16); S (M x N keys) += Q (M x K dims) · Kᵀ and O (M x N dims)
// += P (M x K keys) · V.
// Work split: one workgroup of WG invocations per (block of BR = RB * M new tokens, sequence,
// query head), heads fastest (the query heads of one kv head read the same cache blocks side by
// side), the blocks of the last new tokens (which see the most keys) first. Row block f has DS
// subgroups for the matrix work; each keeps f's Q fragments and its share of O's accumulators in
// registers for the whole kernel and computes its share of each tile's S fragments; the softmax is
// spread over all WG invocations, TPR neighbouring lanes a row (flash_fwd.smx says why).
// Head-dim chunks: a tile's K and V are staged DCH dims at a time (NCH chunks). With one chunk
// (every head dim the adapter's workgroup storage holds whole: D <= 256 on the H100) a tile is
// flash_fwd.smx's, 3 barriers and a uniform load:
//   store the prefetched K and V (f16), fetch the next tile's into registers (in flight while
//   this one is computed) | S = Q Kᵀ to workgroup memory | softmax: scale, softcap, ALiBi, mask,
//   running max, P (f16) to workgroup memory | rescale O if needed (rare) | O += P V.
// With several (D = 512), each K chunk in turn adds its share to S (kept in registers) and each V
// chunk its columns to O, a barrier pair a chunk, one chunk in flight in registers while the one
// before is computed; S is stored once it is whole. Subgroup part p of a row block owns fragments
// p * DNC / DS .. of every chunk's DNC columns of O, so every subgroup has work in every chunk.
// The cache rows a fetch reads come from the block table a tile earlier (one chunk: an address
// that waits on the table stalls the loads, as paged_decode.split found); with several chunks
// each fetch looks its key up itself.
// The lazy rescale is flash_fwd.smx's (a row keeps its running max until a tile's exceeds it by
// TAU). The sink joins at the end: M = max(m, sink), z = l * exp(m - M) + exp(sink - M),
// out = o * exp(m - M) / z, lse = M + log z, with exponentials clamped (no infinity is formed).
// Robustness and alignment: flash_fwd.smx's rules (fragment arrays, one clamped outer index, every
// workgroup variable a multiple of 16 bytes).
// Straight-line, as flash_fwd.smx is (it says why): every loop over fragments, over head-dim
// chunks, over a tile's K/V share and over a row's columns is written out with wgsl.py's #for
// (q{ch}_{c}, o{ch}_{cl}, acc{nl}, k{f}/v{f} with their block-table entries blk{f}, x{c4}), so no
// register array exists and nothing in registers is indexed by a loop counter. What stays a loop
// (the key tiles, Q's staging, O's trips through sf) picks its fragments with constant names
// under conditions on the counter.
// Reference: wgattn.reference.decode_attention (wgattn/interfaces/paged_prefill.py).
#include "lib/subgroup_matrix.wgsl"
// The interface: Params and bindings (its f16 directive, with F16, among the directives above).
#include "interfaces/paged_prefill.wgsl"

#include "lib/varlen.wgsl"
#include "lib/softcap.wgsl"
#include "lib/key_offsets.wgsl"

#include "lib/smx_fragments.wgsl"
// The counts the written-out code repeats, from the plan's defines (for this head_dim, subgroup
// size and tile): MAX_DK = DP / K Q fragments; NCH head-dim chunks of DCH dims, DKC = DCH / K Q
// (and Kᵀ) fragments a chunk (the last chunk may hold fewer: DP need not be a multiple of DCH);
// DNS = DCH / N / DS O fragments of a chunk a subgroup holds; SBD = BC / N / DS S fragments a
// subgroup computes, PBK = BC / K P fragments; MAX_CPI4 vec4 columns of a tile one invocation
// holds in the softmax (BC / TPR / 4); MAX_KVPI vec4 of a K (and V) chunk it prefetches.
#const MAX_DK
#const NCH
#const DKC
#const DNS
#const SBD
#const PBK
#const MAX_CPI4
#const MAX_KVPI
// DS: subgroups per row block (a tile knob: 1, or 2 where DNC and SB are even).
#const DS
const LOWEST: f32 = -3.4028234663852886e38;  // stands for -inf in the running max
const LOG2E: f32 = 1.4426950408889634;
const NONE: u32 = 0xffffffffu;  // a key with no row in the cache: past the band, or its block invalid

alias LF = subgroup_matrix_left<f16, SK, SM>;    // Q and P fragments: M rows x K
alias RF = subgroup_matrix_right<f16, SN, SK>;   // Kᵀ (K dims x N keys) and V (K keys x N dims)
alias AF = subgroup_matrix_result<f32, SN, SM>;  // S and O: M rows x N

override WG: u32;    // invocations per workgroup: TPR * BR, a multiple of the subgroup size
override RB: u32;    // row blocks: BR = RB * M; RB * DS subgroups have matrix work
override BC: u32;    // keys per tile, a multiple of N and K and of 4 * TPR
override DP: u32;    // head_dim padded to a multiple of 16 (zeros past head_dim)
override DCH: u32;   // head dims of a staged chunk of K and V: a multiple of 16, DP when it fits
override TPR: u32;   // invocations per query row in the softmax: 1, 2 or 4 (<= the subgroup size)
override BS: u32;    // tokens per cache block: a constant, so that j / BS and j % BS compile to
                     // multiplies and shifts (wgattn.interfaces.paged_prefill sets it)
override TAU: f32 = 5.5;   // lazy-rescale threshold (natural log): p <= exp(TAU) ~ 245
override BR: u32 = RB * SM;               // new tokens (query rows) per workgroup
override DK: u32 = DP / SK;               // Q fragments along the head dim
override DN: u32 = DP / SN;               // O fragments along the head dim
override DNC: u32 = DCH / SN;             // V and O fragments of a chunk along the head dim
override SB: u32 = BC / SN;               // S fragments per row block
override PB: u32 = BC / SK;               // P fragments per row block
override C4: u32 = DCH / 4u;              // vec4 columns of a chunk
override KVPI: u32 = (BC * C4 + WG - 1u) / WG;      // vec4 of a K (and V) chunk each invocation stages
override QPI: u32 = (BR * BC / 4u + WG - 1u) / WG;  // vec4 of a Q chunk each invocation stages

// Fragment arrays: [fragment][row * stride + vec4 column]. Key tile fragment (n, c) holds keys
// n*N.. and dims c*K.. of the chunk (column-major Kᵀ: one key a row); V fragment (kk, c) keys
// kk*K.., dims c*N.. of the chunk; S/P/Q fragment (s, n) the rows of row block s. Q is staged once
// through kf; P takes Kᵀ's place once S is whole (flash_fwd.smx).
override KPF: u32 = max(SB * DKC, RB * PB);  // fragments of kf: a chunk of Kᵀ, or P
var<workgroup> vf: array<array<vec4<f16>, SK * NP4 + FRAG_PAD4>, PB * DNC>;  // a chunk of V of the tile
var<workgroup> kf: array<array<vec4<f16>, max(SM, SN) * KP4 + FRAG_PAD4>, KPF>;  // a chunk of Kᵀ, then P
var<workgroup> sf: array<array<vec4<f32>, SM * SP4>, RB * SB>;  // S of the tile; O on its way out
// [0] = 1: some row's max grew by more than TAU in this tile (four words: flash_fwd.smx says why).
var<workgroup> rescale: array<atomic<u32>, 4>;

// Vec4 column c of row `row` (token-major: (b * Sq_new + i) * Hq + h) of q, zeros past head_dim.
#if VEC4
fn load_q(row: u32, c: u32, dim: u32) -> vec4<f32> {
  if (c * 4u >= dim) {
    return vec4<f32>(0.0);
  }
  return q[row * (dim / 4u) + c];
}
fn load_cache(from_v: bool, row: u32, c: u32, dim: u32) -> vec4<T> {
  if (c * 4u >= dim) {
    return vec4<T>(0.0);
  }
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

#include "lib/frag_at.wgsl"

// Which sequence, kv head and band of keys a workgroup fetches for (its `band` ends the keys).
struct Seq {
  b: u32,
  g: u32,
  hi: u32,
}

// The block-table entry of the key that vec4 e of a chunk of the tile from t0 belongs to (key
// t0 + e / C4), -1 past the band. Invocation lid's fetch slot f is e = lid + WG * f.
fn slot_block(s: Seq, t0: u32, e: u32) -> i32 {
  let j = t0 + e / C4;
  if (e < BC * C4 && j < s.hi) {
    return block_table[s.b * params.max_blocks + j / BS];
  }
  return -1;
}

// The cache row (block * BS + slot) * Hkv + g of key j in block `blk`; NONE for -1 and for a block
// out of range (refused before dispatch; guarded all the same).
fn cache_row(blk: i32, j: u32, g: u32) -> u32 {
  if (blk < 0 || u32(blk) >= params.num_blocks) {
    return NONE;
  }
  return (u32(blk) * BS + j % BS) * params.heads_kv + g;
}

// Vec4 e of head-dim chunk ch of K (or V) of the tile from t0, its key's block `blk` (slot_block's
// of that tile): zeros past the band, past head_dim and for invalid blocks.
fn fetch_one(from_v: bool, s: Seq, blk: i32, t0: u32, ch: u32, e: u32) -> vec4<T> {
  let row = cache_row(blk, t0 + e / C4, s.g);
  if (row == NONE) {
    return vec4<T>(0.0);
  }
  return load_cache(from_v, row, ch * C4 + e % C4, params.head_dim);
}

// Stores vec4 e of a chunk (fetch_one's) into the fragments of kf (Kᵀ) or vf (V).
fn store_one(e: u32, x: vec4<T>, to_v: bool) {
  if (e < BC * C4) {
    let j = e / C4;
    let d = (e % C4) * 4u;
    if (to_v) {
      let va = frag_at(j, d, SK, SN, NP4, DNC);
      vf[va.x][va.y] = vec4<f16>(x);
    } else {
      let ka = frag_at(j, d, SN, SK, KP4, DKC);
      kf[ka.x][ka.y] = vec4<f16>(x);
    }
  }
}

// exp(d) for d <= 0, through exp2; d is clamped so that no infinity is formed.
fn exp_le0(d: f32) -> f32 {
  return exp2(max(d, -1000.0) * LOG2E);
}

@compute @workgroup_size(WG)
fn prefill(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32, @builtin(subgroup_size) sg_size: u32) {
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
    hi = pos_first + nrows;
    if (wl >= 0) {
      lo = pos_first - min(pos_first, u32(wl));
    }
  }
  let seq = Seq(b, g, hi);
  let dim = params.head_dim;
  let q_row0 = (b * sq + i0) * hq + h;  // q's row of the block's first new token

  let sg = lid / sg_size;  // this subgroup: row block fb = sg / DS, part sg % DS, when sg < RB * DS
  let fb = sg / DS;
  let part = sg % DS;
  let mx = sg < RB * DS;  // has matrix work
  // Softmax role: row r of the block, vec4 columns c0, c0 + 4 * TPR, .. of each tile (as
  // flash_fwd.smx's).
  let r = lid / TPR;
  let c0 = (lid % TPR) * 4u;
  let row_ok = live && r < nrows;
  let pos = i32(select(0u, n - sq + i0 + r, live));
  let row_hi = select(0, pos + 1, row_ok);  // a row past the new tokens sees nothing
  var row_lo = 0;
  if (wl >= 0) {
    row_lo = max(0, pos - wl);
  }
  let hp = head_params[h];  // (ALiBi slope, sink)

  // Q: staged as f16 through kf in chunks of BC dims, loaded into registers: q{ch}_{c} is row
  // block fb's fragment ch * DKC + c (in head-dim chunk ch).
#for ch NCH
#for c min(DKC, MAX_DK - {ch} * DKC)
  var q{ch}_{c}: LF;
#endfor
#endfor
  for (var qc = 0u; qc < (DK + PB - 1u) / PB; qc++) {
    for (var f = 0u; f < QPI; f++) {
      let e = lid + WG * f;
      if (e < BR * BC / 4u) {
        let rr = e / (BC / 4u);
        let col = (e % (BC / 4u)) * 4u;
        var x = vec4<f32>(0.0);
        if (rr < nrows) {
          x = load_q(q_row0 + rr * hq, (qc * BC + col) / 4u, dim);
        }
        let at = frag_at(rr, col, SM, SK, KP4, PB);
        kf[at.x][at.y] = vec4<f16>(x);
      }
    }
    workgroupBarrier();
    if (mx) {
#for ch NCH
#for c min(DKC, MAX_DK - {ch} * DKC)
      if (({ch}u * DKC + {c}u) / PB == qc) {
        q{ch}_{c} = subgroupMatrixLoad<LF, row_major>(&kf[fb * PB + ({ch}u * DKC + {c}u) % PB], 0u, KP4);
      }
#endfor
#endfor
    }
    workgroupBarrier();
  }

  if (lid == 0u) {
    atomicStore(&rescale[0], 0u);
  }
  let cap = params.softcap;
  let scale = params.scale;
  var m = LOWEST;  // the row's running max (the one p was taken against)
  var l = 0.0;     // this invocation's share of the row sum
#for ch NCH
#for cl DNS
  var o{ch}_{cl}: AF;  // O fragment {ch} * DNC + part * DNS + {cl} of row block fb (zeros)
#endfor
#endfor

  // Fetch slot f (vec4 lid + WG * f of a chunk): the first tile's (first chunk of) K and V in
  // flight in k{f} (and v{f}); with one chunk, blk{f} then holds the next tile's table entry.
#for f MAX_KVPI
  var blk{f} = slot_block(seq, lo, lid + WG * {f}u);
  var k{f} = fetch_one(false, seq, blk{f}, lo, 0u, lid + WG * {f}u);
  var v{f}: vec4<T>;  // one chunk only: several share k{f} between K and V
  if (NCH == 1u) {
    v{f} = fetch_one(true, seq, blk{f}, lo, 0u, lid + WG * {f}u);
    blk{f} = slot_block(seq, lo + BC, lid + WG * {f}u);
  }
#endfor
  for (var t0 = lo; t0 < hi; t0 += BC) {
    // S = Q Kᵀ for row block fb, this subgroup's SBD fragments, chunk by chunk.
#for nl SBD
    var acc{nl} = AF();
#endfor
    if (NCH > 1u) {  // several chunks: this tile's entries (one chunk: blk{f} is the next tile's)
#for f MAX_KVPI
      blk{f} = slot_block(seq, t0, lid + WG * {f}u);
#endfor
    }
#for ch NCH
#for f MAX_KVPI
    store_one(lid + WG * {f}u, k{f}, false);
    if (NCH == 1u) {  // flash_fwd.smx's tile: K and V together, the next tile's in flight
      store_one(lid + WG * {f}u, v{f}, true);
      k{f} = fetch_one(false, seq, blk{f}, t0 + BC, 0u, lid + WG * {f}u);
      v{f} = fetch_one(true, seq, blk{f}, t0 + BC, 0u, lid + WG * {f}u);
      blk{f} = slot_block(seq, t0 + 2u * BC, lid + WG * {f}u);
    } else if ({ch}u + 1u < NCH) {
      k{f} = fetch_one(false, seq, blk{f}, t0, {ch}u + 1u, lid + WG * {f}u);
    } else {
      k{f} = fetch_one(true, seq, blk{f}, t0, 0u, lid + WG * {f}u);  // V's first chunk, the next stage
    }
#endfor
    workgroupBarrier();  // chunk {ch} of K (and V) is staged
    if (mx) {
#for nl SBD
      {
        let nn = part * SBD + {nl}u;
#for c min(DKC, MAX_DK - {ch} * DKC)
        {
          let kt = subgroupMatrixLoad<RF, col_major>(&kf[nn * DKC + {c}u], 0u, KP4);
          acc{nl} = subgroupMatrixMultiplyAccumulate(q{ch}_{c}, kt, acc{nl});
        }
#endfor
      }
#endfor
    }
    if (NCH > 1u) {
      workgroupBarrier();  // the chunk is no longer read
    }
#endfor
    if (mx) {
#for nl SBD
      subgroupMatrixStore<row_major>(&sf[fb * SB + part * SBD + {nl}u], 0u, acc{nl}, SP4);
#endfor
    }
    workgroupBarrier();  // S is in workgroup memory

    // Softmax over this invocation's columns of row r.
    var tile_max = LOWEST;
#for c4 MAX_CPI4
    var x{c4}: vec4<f32>;
    {
      let col = c0 + 4u * TPR * {c4}u;
      let at = frag_at(r, col, SM, SN, SP4, SB);
      var s = sf[at.x][at.y] * scale;
      if (cap > 0.0) {
        s = vec4<f32>(softcap_apply(s.x, cap), softcap_apply(s.y, cap), softcap_apply(s.z, cap),
                      softcap_apply(s.w, cap));
      }
      let j = vec4<i32>(i32(t0 + col)) + vec4<i32>(0, 1, 2, 3);
      s += hp.x * key_offsets4(i32(t0 + col), pos);
      s = select(vec4<f32>(LOWEST), s, (j >= vec4<i32>(row_lo)) & (j < vec4<i32>(row_hi)));
      x{c4} = s;
      tile_max = max(tile_max, max(max(s.x, s.y), max(s.z, s.w)));
    }
#endfor
    if (TPR > 1u) {
      tile_max = max(tile_max, subgroupShuffleXor(tile_max, 1u));
    }
    if (TPR > 2u) {
      tile_max = max(tile_max, subgroupShuffleXor(tile_max, 2u));
    }
    var alpha = 1.0;
    if (tile_max > LOWEST) {
      if (m == LOWEST) {
        m = tile_max;  // the row's first visible keys: its O is still zero
      } else if (tile_max > m + TAU) {
        alpha = exp_le0(m - tile_max);
        m = tile_max;
        atomicOr(&rescale[0], 1u);
      }
    }
    var sum = 0.0;
#for c4 MAX_CPI4
    {
      let d = clamp(x{c4} - m, vec4<f32>(-1000.0), vec4<f32>(TAU));  // <= TAU where visible; no infinity formed
      let p = select(vec4<f32>(0.0), exp2(d * LOG2E), x{c4} > vec4<f32>(LOWEST));
      sum += (p.x + p.y) + (p.z + p.w);
      let at = frag_at(r, c0 + 4u * TPR * {c4}u, SM, SK, KP4, PB);
      kf[at.x][at.y] = vec4<f16>(p);
    }
#endfor
    l = l * alpha + sum;

    // O *= alpha per row, through sf in chunks of SB fragments (rare: see flash_fwd.smx).
    if (workgroupUniformLoad(&rescale[0]) != 0u) {
      for (var sc = 0u; sc < (DN + SB - 1u) / SB; sc++) {
        if (mx) {
#for ch NCH
#for cl DNS
          {
            let c = {ch}u * DNC + part * DNS + {cl}u;
            if (c / SB == sc && c < DN) {
              subgroupMatrixStore<row_major>(&sf[fb * SB + c % SB], 0u, o{ch}_{cl}, SP4);
            }
          }
#endfor
#endfor
        }
        workgroupBarrier();
#for c4 MAX_CPI4
        {
          let at = frag_at(r, c0 + 4u * TPR * {c4}u, SM, SN, SP4, SB);
          sf[at.x][at.y] *= alpha;
        }
#endfor
        workgroupBarrier();
        if (mx) {
#for ch NCH
#for cl DNS
          {
            let c = {ch}u * DNC + part * DNS + {cl}u;
            if (c / SB == sc && c < DN) {
              o{ch}_{cl} = subgroupMatrixLoad<AF, row_major>(&sf[fb * SB + c % SB], 0u, SP4);
            }
          }
#endfor
#endfor
        }
        workgroupBarrier();
      }
      if (lid == 0u) {
        atomicStore(&rescale[0], 0u);  // read by all above; the next write is a tile away
      }
    }

    // O += P V for this subgroup's head-dim fragments, chunk by chunk (one chunk: V is staged).
#for ch NCH
    if (NCH > 1u) {
#for f MAX_KVPI
      store_one(lid + WG * {f}u, k{f}, true);
      if ({ch}u + 1u < NCH) {
        k{f} = fetch_one(true, seq, blk{f}, t0, {ch}u + 1u, lid + WG * {f}u);
      } else {  // the next tile's first K chunk
        k{f} = fetch_one(false, seq, slot_block(seq, t0 + BC, lid + WG * {f}u), t0 + BC, 0u, lid + WG * {f}u);
      }
#endfor
      workgroupBarrier();  // chunk {ch} of V is staged
    }
    if (mx) {
#for kk PBK
      {
        let p = subgroupMatrixLoad<LF, row_major>(&kf[fb * PB + {kk}u], 0u, KP4);
#for cl DNS
        {
          let vt = subgroupMatrixLoad<RF, row_major>(&vf[{kk}u * DNC + part * DNS + {cl}u], 0u, NP4);
          o{ch}_{cl} = subgroupMatrixMultiplyAccumulate(p, vt, o{ch}_{cl});
        }
#endfor
      }
#endfor
    }
    workgroupBarrier();  // P, V and S are no longer read
#endfor
  }

  // Row sums, the sink, then O * f / z through sf in chunks of SB fragments (BC columns).
  var total = l;
  if (TPR > 1u) {
    total += subgroupShuffleXor(total, 1u);
  }
  if (TPR > 2u) {
    total += subgroupShuffleXor(total, 2u);
  }
  let seen = total > 0.0;  // z >= 1 then (the term at the max is 1)
  let sinks_on = params.sinks_on != 0u;
  var top = select(LOWEST, m, seen);
  if (sinks_on) {
    top = max(top, hp.y);
  }
  let fo = select(0.0, exp_le0(m - top), seen);
  var z = total * fo;
  if (sinks_on) {
    z += exp_le0(hp.y - top);
  }
  let inv = select(0.0, fo / z, seen);
  let row = q_row0 + r * hq;
  for (var sc = 0u; sc < (DN + SB - 1u) / SB; sc++) {
    if (mx) {
#for ch NCH
#for cl DNS
      {
        let c = {ch}u * DNC + part * DNS + {cl}u;
        if (c / SB == sc && c < DN) {
          subgroupMatrixStore<row_major>(&sf[fb * SB + c % SB], 0u, o{ch}_{cl}, SP4);
        }
      }
#endfor
#endfor
    }
    workgroupBarrier();
    if (r < nrows) {
#for c4 MAX_CPI4
      {
        let col = c0 + 4u * TPR * {c4}u;
        let d = sc * BC + col;  // head-dim column of O
        if (d < dim) {
          let at = frag_at(r, col, SM, SN, SP4, SB);
          let y = sf[at.x][at.y] * inv;
#if VEC4
          out[row * (dim / 4u) + d / 4u] = y;
#else
          for (var e = 0u; e < 4u; e++) {
            if (d + e < dim) {
              out[row * dim + d + e] = y[e];
            }
          }
#endif
        }
      }
#endfor
    }
    workgroupBarrier();
  }
  if (r < nrows && c0 == 0u) {
    lse[row] = select(neg_inf(), top + log(z), z > 0.0);
  }
}
