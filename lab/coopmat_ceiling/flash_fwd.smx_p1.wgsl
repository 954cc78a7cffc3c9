// flash_fwd.smx_p1: flash_fwd.smx (shaders/flash_fwd.smx.wgsl) with its key tiles software-pipelined
// at one barrier a tile: a candidate of lab/coopmat_ceiling (fwd_candidates.py copies it into
// shaders/ and registers it beside flash_fwd.smx). Step k runs O += P(k-1) V(k-1), S(k+1) = Q K(k+1)ᵀ
// and the softmax of S(k) between the same two barriers, so each subgroup's matrix products are in
// flight while its lanes compute the softmax (FlashAttention-3's overlap of the two, within a
// warp). Kᵀ, V, P and S each have two buffers (P no longer takes Kᵀ's place), which 48 KiB holds at
// 8 row blocks of 16 keys at D = 64, 4 row blocks at D = 128. flash_fwd.smx's header follows.
// flash_fwd.smx: FlashAttention-2 forward on subgroup matrices (tensor cores where the adapter has
// them): Q·Kᵀ and P·V are f16 x f16 -> f32 matrix products, the online softmax is f32. wgattn's
// flash_fwd contract: packed varlen, GQA, (left, right) windows in both alignments, softcap, ALiBi,
// attention sinks, lse.
//
//   Per sequence b, query row i (head h), key j (kv head g = h / (heads_q / heads_kv)):
//     s0_ij = scale * q_i . k_j;  s_ij = softcap * tanh(s0_ij / softcap) if softcap > 0 else s0_ij
//     s_ij -= slope_h * |j - (i + offset)|                        (alibi_on; slope_h = alibi_sinks[h])
//     z_i = sum_j exp(s_ij) over visible j  (+ exp(sink_h) with sinks_on; sink_h = alibi_sinks[heads_q + h])
//     out_i = sum_j exp(s_ij) / z_i v_j over visible j;  lse_i = log z_i
//   Visible: with offset = len_k - len_q (bottom-right) or 0 (top-left),
//     (window_left < 0 or j >= i + offset - window_left) and (window_right < 0 or j <= i + offset + window_right).
//   A row with no visible key gets out = 0 and lse = -inf (sink_h with sinks_on).
//
// Layout (token-major, f32): q, out [total_q, heads_q, D]; k, v [total_k, heads_kv, D];
// lse [total_q, heads_q]; cu_seqlens_* [batch_size + 1]. q, k and v are rounded to f16 as they are
// staged (the kernel is judged by the f16 rule: f16-rounded inputs against the float64 reference).
//
// Matrix shapes: the adapter's subgroupMatrixConfigs decide M x N x K (the plan picks one and
// sets the defines SMX_M16 / SMX_N16 / SMX_K16: 16 when set, else 8; WGSL wants the dimensions as
// constants). One configuration serves both products:
//   S (M x N keys)  += Q (M x K dims) · Kᵀ (K dims x N keys)
//   O (M x N dims)  += P (M x K keys) · V  (K keys x N dims)
// Work split: one workgroup of WG invocations per (block of BR = RB * M query rows, sequence,
// query head), heads fastest, the longest (causal) row blocks first. RPS row blocks at a time
// (rows f*M .. (f+RPS)*M-1, f a multiple of RPS) have DS subgroups for the matrix work,
// f/RPS*DS .. f/RPS*DS+DS-1: each keeps their Q fragments and 1/DS of their O accumulators (D/N/DS
// result matrices: head-dim chunks) in registers for the whole kernel, and computes 1/DS of each
// tile's S fragments of them; each K and V fragment it loads feeds RPS products (the GEMM's
// reuse of a right fragment across a subgroup's rows). DS = 2 halves the registers O
// takes (64 of them at D = 128) and doubles the subgroups a workgroup has to hide latency with:
// measured faster on the H100 at D > 64, slower at D = 64, where the tiles keep DS = 1 (the
// history holds the figures). The softmax is spread over all WG invocations independently of
// the subgroup size: invocation t owns row bank_row(t / TPR, TPR) (rows permuted within blocks
// of 8: lib/bank_rows.wgsl says why) and every TPR-th vec4 column of each key tile from vec4
// column t % TPR (lib/smx_fragments.wgsl says why); the TPR invocations of a row are
// neighbouring lanes of one subgroup and combine row maxima and sums with subgroupShuffleXor.
// Subgroups are taken as WG / subgroup_size runs of consecutive local_invocation_index (every
// Vulkan driver lays a 1-D workgroup out so); the conformance cases would fail loudly otherwise.
//
// Per key tile of BC keys, the band's last tile first (3 barriers + one uniform load):
//   store the prefetched K and V (f32 -> f16), load the next tile's into registers (in flight
//   while this one is computed) | S = Q Kᵀ, stored to workgroup memory | softmax: mask, scale,
//   softcap, running max, P (f16) to workgroup memory | rescale O if needed (rare) | O += P V.
// The rescale is lazy (FlashAttention-4): a row keeps its running max until a tile's max exceeds it
// by more than TAU (natural-log units; p = exp(s - max) then stays <= exp(TAU), fine in f16), and
// only then is O scaled. An accumulator cannot be scaled per row, so that rare path stores O to
// workgroup memory, scales rows there and loads it back; it is workgroup-uniform (any row in the
// block asks for it through an atomic flag read with workgroupUniformLoad). TAU = 0 rescales on
// every increase of the max, as FlashAttention-2 does.
// The sink joins at the end, not as the running max's start (P is f16: against a dominant sink
// every p would underflow): M = max(m, sink), z = l * exp(m - M) + exp(sink - M),
// out = O * exp(m - M) / z, lse = M + log z.
//
// Robustness: every operand in workgroup memory lives in an array of fragments (one inner array
// per M x K, K x N or M x N block, rows padded by PADH halves so the 16-byte rows of a fragment
// fall in different banks, the fragments of K and V by FRAG_PAD4: lib/frag_pad.wgsl says
// why); a matrix load or store takes a pointer to one inner array, offset 0
// and a constant stride, so Dawn's robustness transform proves it in bounds and adds no
// predicate to it; only the outer index gets a clamp (min), which keeps the address aligned.
// (Robustness's check of a computed offset makes the stride a runtime value: NVIDIA's own GEMM
// sample with that check added runs at a sixth of its speed.)
// Straight-line: every loop over fragments, over a tile's K/V share and over a row's columns is
// written out (wgsl.py's #for: q{c}, o{cl}, k{f}/v{f}, x{c4}), so no register array exists for a
// driver to demote to local memory when it does not unroll a loop (NVIDIA's does not unroll
// loops without hints once they grow, and Tint emits none; gemm.smx measures it).
// Dawn zero-fills workgroup memory and wgpu does not: everything read is written first here.
// Reference: wgattn.reference.varlen_attention_fwd, keywords mapped in wgattn/interfaces/flash_fwd.py.
#include "lib/subgroup_matrix.wgsl"

#include "lib/varlen.wgsl"
#include "lib/softcap.wgsl"
#include "lib/key_offsets.wgsl"

#include "lib/smx_fragments.wgsl"
// The counts the written-out code repeats, from the plan's defines (for this head_dim, subgroup
// size and tile): MAX_DK = DP / K Q fragments; MAX_DN = DP / N O fragments, DNS = MAX_DN / DS of
// them a subgroup; SBD = BC / N / DS S fragments a subgroup computes, PBK = BC / K P fragments;
// MAX_CPI4: vec4 columns of a tile one invocation holds in the softmax (BC / TPR / 4); MAX_KVPI:
// vec4 of K (and of V) it prefetches. Q and O are moved to and from workgroup memory by code over
// every fragment that picks a chunk's (a fragment chosen by an index computed in the chunk loop
// put O in local memory, a large loss at D = 64).
#const MAX_DK
#const MAX_DN
#const MAX_CPI4
// DS: subgroups per row block (a tile knob: 1, or 2 where DN and SB are even).
#const DS
#const DNS
// RPS: row blocks per matrix subgroup (a tile knob: 1, or 2 where RB is even).
#const RPS
#const SBD
#const PBK
const LOWEST: f32 = -3.4028234663852886e38;  // stands for -inf in the running max
const LOG2E: f32 = 1.4426950408889634;

alias LF = subgroup_matrix_left<f16, SK, SM>;    // Q and P fragments: M rows x K
alias RF = subgroup_matrix_right<f16, SN, SK>;   // Kᵀ (K dims x N keys) and V (K keys x N dims)
alias AF = subgroup_matrix_result<f32, SN, SM>;  // S and O: M rows x N

override WG: u32;    // invocations per workgroup: TPR * BR, a multiple of the subgroup size
override RB: u32;    // row blocks: BR = RB * M; RB * DS subgroups have matrix work
override BC: u32;    // keys per tile, a multiple of N and K and of 4 * TPR
override DP: u32;    // head_dim padded to a multiple of N and K (zeros past head_dim)
override TPR: u32;   // invocations per query row in the softmax: 1, 2 or 4 (<= the subgroup size)
override TAU: f32 = 5.5;   // lazy-rescale threshold (natural log): p <= exp(TAU) ~ 245
override BR: u32 = RB * SM;               // query rows per workgroup
override DK: u32 = DP / SK;               // Q and Kᵀ fragments along the head dim
override DN: u32 = DP / SN;               // O and V fragments along the head dim
override SB: u32 = BC / SN;               // S fragments per row block
override PB: u32 = BC / SK;               // P fragments per row block
override CPI: u32 = BC / TPR;             // tile columns per invocation in the softmax
override KVPI: u32 = (BC * DP / 4u + WG - 1u) / WG;  // vec4 of K (and of V) each invocation stages
override QPI: u32 = (BR * BC / 4u + WG - 1u) / WG;   // vec4 of a Q chunk each invocation stages

// The interface: Params and bindings.
#include "interfaces/flash_fwd.wgsl"

// Fragment arrays: [fragment][row * stride + vec4 column]. Key tile fragment (n, c) holds keys
// n*N.. and dims c*K.. (column-major Kᵀ: one key a row); V fragment (kk, c) keys kk*K.., dims
// c*N..; S/P/Q fragment (s, n) the rows of row block s. Q is staged once through kf.
// Kᵀ is read only before the barrier that publishes S, and P is written only after it, so P takes
// Kᵀ's place: kf holds Kᵀ, then P (and Q's chunks before the first tile). That leaves room for 32
// keys a tile at D = 128 in 48 KiB (measured faster on the H100 than 16).
// Two buffers each (tile parity): [parity * fragments of a tile + fragment].
var<workgroup> vf: array<array<vec4<f16>, SK * NP4 + FRAG_PAD4>, 2 * PB * DN>;  // V
var<workgroup> kf: array<array<vec4<f16>, SN * KP4 + FRAG_PAD4>, 2 * SB * DK>;  // Kᵀ
var<workgroup> pf: array<array<vec4<f16>, SM * KP4 + FRAG_PAD4>, 2 * RB * PB>;  // P (Q's chunks first)
var<workgroup> sf: array<array<vec4<f32>, SM * SP4>, 2 * RB * SB>;  // S; O on its way out
// [0] = 1: some row's max grew by more than TAU in this tile. Four words, not one: NVIDIA's driver
// reads a subgroup matrix from its address rounded down to 16 bytes, and a 4-byte variable laid
// out beside the fragment arrays left two of them (Q/P and V) at 8 mod 16, so every Q and V
// fragment was read one vec4<f16> early on the H100 (lavapipe reads the exact address). With every
// workgroup variable a multiple of 16 bytes, each fragment array starts 16-byte aligned.
var<workgroup> rescale: array<atomic<u32>, 4>;  // [parity]

// load_q, load_kv (zeros past head_dim) and frag_at.
#include "lib/flash_fwd_smx_loads.wgsl"

#include "lib/bank_rows.wgsl"

// This invocation's share of the K and V tile of BC keys from t0 (vec4 lid + WG * f of the tile
// is key (lid + WG * f) / (DP / 4)): f32, converted to f16 when stored (so that the prefetch does
// not wait for its loads), zeros past `hi` and past head_dim.
alias KVT = vec4<f32>;
fn fetch_one(t0: i32, hi: i32, k_start: i32, hkv: u32, kvh: u32, dim: u32, e: u32, from_v: bool) -> KVT {
  let j = e / (DP / 4u);
  let c = e % (DP / 4u);
  if (e >= BC * DP / 4u || t0 + i32(j) >= hi) {
    return KVT(0.0);
  }
  let row = u32(k_start + t0 + i32(j)) * hkv + kvh;
  return load_kv(from_v, row, c, dim);
}

// Stores vec4 e of the tile (fetched by fetch_one) into the fragments of kf or vf.
fn store_one(e: u32, x: KVT, to_v: bool, buf: u32) {
  if (e < BC * DP / 4u) {
    let j = e / (DP / 4u);
    let d = (e % (DP / 4u)) * 4u;
    if (to_v) {
      let va = frag_at(j, d, SK, SN, NP4, DN);
      vf[buf * PB * DN + va.x][va.y] = vec4<f16>(x);
    } else {
      let ka = frag_at(j, d, SN, SK, KP4, DK);
      kf[buf * SB * DK + ka.x][ka.y] = vec4<f16>(x);
    }
  }
}

// The next tile's share is held in registers (k{f}, v{f}) while this tile is computed.
#const MAX_KVPI

@compute @workgroup_size(WG)
fn flash_fwd(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32, @builtin(subgroup_size) sg_size: u32) {
  #include "lib/flash_fwd_grid.wgsl"
  let blocks = (params.max_seqlen_q + BR - 1u) / BR;
  let from_end = w / (hq * nb);
  if (from_end >= blocks) {
    return;
  }
  let block = blocks - 1u - from_end;  // the longest causal blocks start first
  #include "lib/flash_fwd_block.wgsl"
  let d4 = (dim + 3u) / 4u;

  let sg = lid / sg_size;  // this subgroup: row blocks fb .. fb + RPS - 1, part sg % DS, when mx
  let fb = sg / DS * RPS;
  let part = sg % DS;
  let mx = sg < RB / RPS * DS;  // has matrix work
  // Softmax role: row r of the block, vec4 columns c0, c0 + 4 * TPR, .. of each tile.
  let r = bank_row(lid / TPR, TPR);
  let c0 = (lid % TPR) * 4u;
  let i = row0 + i32(r);
  let row_ok = i <= row_last;
  var lo = 0;
  var hi = select(0, len_k, row_ok);  // a row past the sequence sees nothing
  if (wl >= 0) {
    lo = max(lo, i + offset - wl);
  }
  if (wr >= 0) {
    hi = min(hi, i + offset + wr + 1);
  }

  // Q: staged as f16 through kf in chunks of BC dims, loaded into registers.
#for rr RPS
#for c MAX_DK
  var q{rr}_{c}: LF;  // row block fb + {rr}'s fragment {c}
#endfor
#endfor
  for (var ch = 0u; ch < (DK + PB - 1u) / PB; ch++) {
    for (var f = 0u; f < QPI; f++) {
      let e = lid + WG * f;
      if (e < BR * BC / 4u) {
        let rr = e / (BC / 4u);
        let col = (e % (BC / 4u)) * 4u;
        var x = vec4<f32>(0.0);
        if (row0 + i32(rr) <= row_last) {
          x = load_q(u32(q_start + row0 + i32(rr)) * hq + head, (ch * BC + col) / 4u, dim);
        }
        let at = frag_at(rr, col, SM, SK, KP4, PB);
        pf[at.x][at.y] = vec4<f16>(x);
      }
    }
    workgroupBarrier();
    if (mx) {
#for rr RPS
#for c MAX_DK
      if ({c}u / PB == ch) {
        q{rr}_{c} = subgroupMatrixLoad<LF, row_major>(&pf[(fb + {rr}u) * PB + {c}u % PB], 0u, KP4);
      }
#endfor
#endfor
    }
    workgroupBarrier();
  }

  if (lid < 4u) {
    atomicStore(&rescale[lid], 0u);
  }
  let cap = params.softcap;
  let scale = params.scale;
  let alibi = params.alibi_on != 0u;
  let slope = alibi_sinks[head];  // 0 without ALiBi
  let pos = i + offset;  // the row's diagonal position
  var m = LOWEST;  // the row's running max (the one p was taken against)
  var l = 0.0;     // this invocation's share of the row sum
#for rr RPS
#for cl DNS
  var o{rr}_{cl}: AF;  // head-dim chunk part * DNS + {cl} of row block fb + {rr}'s O (zeros)
#endfor
#endfor

  // The key tiles from the band's last down to its first, as FlashAttention's forward walks
  // them (under a causal mask the diagonal's tile first). Tile k starts at key last - k * BC.
  let last = band.x + max((band.y - band.x + i32(BC) - 1) / i32(BC) - 1, 0) * i32(BC);
  let tiles = select(0, (band.y - band.x + i32(BC) - 1) / i32(BC), band.y > band.x);
  // Kᵀ of tiles 0 and 1 staged at once; K of tile 2 and V of tile 0 in flight in registers.
#for f MAX_KVPI
  store_one(lid + WG * {f}u, fetch_one(last, band.y, k_start, hkv, kvh, dim, lid + WG * {f}u, false), false, 0u);
  store_one(lid + WG * {f}u, fetch_one(last - i32(BC), select(band.y, last - i32(BC), 1 >= tiles), k_start, hkv, kvh, dim, lid + WG * {f}u, false), false, 1u);
  var k{f} = fetch_one(last - 2 * i32(BC), select(band.y, last - 2 * i32(BC), 2 >= tiles), k_start, hkv, kvh, dim, lid + WG * {f}u, false);
  var v{f} = fetch_one(last, band.y, k_start, hkv, kvh, dim, lid + WG * {f}u, true);
#endfor
  workgroupBarrier();  // Kᵀ of tiles 0 and 1 staged
  // S of tile 0.
  if (mx) {
#for nl SBD
    {
      let n = part * SBD + {nl}u;
#for rr RPS
      var acc{rr} = AF();
#endfor
#for c MAX_DK
      {
        let kt = subgroupMatrixLoad<RF, col_major>(&kf[n * DK + {c}u], 0u, KP4);
#for rr RPS
        acc{rr} = subgroupMatrixMultiplyAccumulate(q{rr}_{c}, kt, acc{rr});
#endfor
      }
#endfor
#for rr RPS
      subgroupMatrixStore<row_major>(&sf[(fb + {rr}u) * SB + n], 0u, acc{rr}, SP4);
#endfor
    }
#endfor
  }
  workgroupBarrier();  // S of tile 0 in workgroup memory

  // Step k (one barrier a step, buffers of parity k % 2 = cur and the other, nxt):
  //   rescale O by tile k - 1's alpha (rare) | O += P(k-1) V(k-1) | S(k+1) = Q K(k+1)ᵀ issued |
  //   softmax of S(k) -> P(k) | S(k+1) stored | K(k+2) and V(k) stored, K(k+3) and V(k+1) fetched
  // The products of tiles k - 1 and k + 1 and the softmax of tile k read and write different
  // buffers, so one barrier separates the steps and each subgroup's products overlap its softmax.
  var alpha_prev = 1.0;  // alpha of tile k - 1 for this invocation's row
  var flag = 0u;         // some row of tile k - 1 rescaled (workgroup-uniform)
  for (var k = 0; k <= tiles; k++) {
    let cur = u32(k) % 2u;
    let nxt = 1u - cur;
    let t0 = last - k * i32(BC);
    if (flag != 0u) {  // O *= alpha_prev per row, through sf[nxt] in chunks of SB fragments
      for (var ch = 0u; ch < (DN + SB - 1u) / SB; ch++) {
        if (mx) {
#for rr RPS
#for cl DNS
          if ((part * DNS + {cl}u) / SB == ch) {
            subgroupMatrixStore<row_major>(&sf[nxt * RB * SB + (fb + {rr}u) * SB + (part * DNS + {cl}u) % SB], 0u, o{rr}_{cl}, SP4);
          }
#endfor
#endfor
        }
        workgroupBarrier();
#for c4 MAX_CPI4
        {
          let at = frag_at(r, c0 + 4u * TPR * {c4}u, SM, SN, SP4, SB);
          sf[nxt * RB * SB + at.x][at.y] *= alpha_prev;
        }
#endfor
        workgroupBarrier();
        if (mx) {
#for rr RPS
#for cl DNS
          if ((part * DNS + {cl}u) / SB == ch) {
            o{rr}_{cl} = subgroupMatrixLoad<AF, row_major>(&sf[nxt * RB * SB + (fb + {rr}u) * SB + (part * DNS + {cl}u) % SB], 0u, SP4);
          }
#endfor
#endfor
        }
        workgroupBarrier();
      }
    }
    if (lid == 0u) {
      atomicStore(&rescale[nxt], 0u);  // tile k - 1's flag, read by all at the last barrier
    }
    // O += P(k-1) V(k-1) for this subgroup's head-dim chunks.
    if (mx && k > 0) {
#for kk PBK
      {
#for rr RPS
        let p{rr} = subgroupMatrixLoad<LF, row_major>(&pf[nxt * RB * PB + (fb + {rr}u) * PB + {kk}u], 0u, KP4);
#endfor
#for cl DNS
        {
          let vt = subgroupMatrixLoad<RF, row_major>(&vf[nxt * PB * DN + {kk}u * DN + part * DNS + {cl}u], 0u, NP4);
#for rr RPS
          o{rr}_{cl} = subgroupMatrixMultiplyAccumulate(p{rr}, vt, o{rr}_{cl});
#endfor
        }
#endfor
      }
#endfor
    }
    if (k == tiles) {
      break;
    }
    // S(k+1) = Q K(k+1)ᵀ: issued here, stored after the softmax.
    let s_next = mx && k + 1 < tiles;
#for nl SBD
#for rr RPS
    var acc{nl}_{rr} = AF();
#endfor
#endfor
    if (s_next) {
#for nl SBD
#for c MAX_DK
      {
        let kt = subgroupMatrixLoad<RF, col_major>(&kf[nxt * SB * DK + (part * SBD + {nl}u) * DK + {c}u], 0u, KP4);
#for rr RPS
        acc{nl}_{rr} = subgroupMatrixMultiplyAccumulate(q{rr}_{c}, kt, acc{nl}_{rr});
#endfor
      }
#endfor
#endfor
    }

    // Softmax of tile k over this invocation's columns of row r.
    var tile_max = LOWEST;
#for c4 MAX_CPI4
    var x{c4}: vec4<f32>;
    {
      let col = c0 + 4u * TPR * {c4}u;
      let at = frag_at(r, col, SM, SN, SP4, SB);
      var s = sf[cur * RB * SB + at.x][at.y] * scale;
      if (cap > 0.0) {
        s = vec4<f32>(softcap_apply(s.x, cap), softcap_apply(s.y, cap), softcap_apply(s.z, cap),
                      softcap_apply(s.w, cap));
      }
      let j = vec4<i32>(t0 + i32(col)) + vec4<i32>(0, 1, 2, 3);
      if (alibi) {
        s -= slope * abs(key_offsets4(t0 + i32(col), pos));
      }
      s = select(vec4<f32>(LOWEST), s, (j >= vec4<i32>(lo)) & (j < vec4<i32>(hi)));
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
        alpha = exp2((m - tile_max) * LOG2E);
        m = tile_max;
        atomicOr(&rescale[cur], 1u);
      }
    }
    var sum = 0.0;
#for c4 MAX_CPI4
    {
      let p = select(vec4<f32>(0.0), exp2((x{c4} - m) * LOG2E), x{c4} > vec4<f32>(LOWEST));
      sum += (p.x + p.y) + (p.z + p.w);
      let at = frag_at(r, c0 + 4u * TPR * {c4}u, SM, SK, KP4, PB);
      pf[cur * RB * PB + at.x][at.y] = vec4<f16>(p);
    }
#endfor
    l = l * alpha + sum;
    alpha_prev = alpha;

    if (s_next) {
#for nl SBD
#for rr RPS
      subgroupMatrixStore<row_major>(&sf[nxt * RB * SB + (fb + {rr}u) * SB + part * SBD + {nl}u], 0u, acc{nl}_{rr}, SP4);
#endfor
#endfor
    }
    // Kᵀ of tile k + 2 into kf[cur] (tile k's, read a step ago), V of tile k into vf[cur].
    let kn = t0 - 3 * i32(BC);
#for f MAX_KVPI
    store_one(lid + WG * {f}u, k{f}, false, cur);
    store_one(lid + WG * {f}u, v{f}, true, cur);
    k{f} = fetch_one(kn, select(band.y, kn, k + 3 >= tiles), k_start, hkv, kvh, dim, lid + WG * {f}u, false);
    v{f} = fetch_one(t0 - i32(BC), select(band.y, t0 - i32(BC), k + 1 >= tiles), k_start, hkv, kvh, dim, lid + WG * {f}u, true);
#endfor
    flag = workgroupUniformLoad(&rescale[cur]);  // the step's barrier
  }
  workgroupBarrier();  // P, V and S are no longer read

  // Row sums, the sink, then O * exp(m - M) / z through sf in chunks of SB fragments (BC columns).
  var total = l;
  if (TPR > 1u) {
    total += subgroupShuffleXor(total, 1u);
  }
  if (TPR > 2u) {
    total += subgroupShuffleXor(total, 2u);
  }
  let visible = total > 0.0;  // total >= 1 then (the term at the max is 1)
  let sinks_on = params.sinks_on != 0u;
  var top = select(LOWEST, m, visible);  // M
  var sink = 0.0;
  if (sinks_on) {
    sink = alibi_sinks[hq + head];
    top = max(top, sink);
  }
  let fo = select(0.0, exp2((m - top) * LOG2E), visible);  // <= 1
  var z = total * fo;
  if (sinks_on) {
    z += exp2((sink - top) * LOG2E);
  }
  let inv = select(0.0, fo / z, visible);
  let row = u32(q_start + i) * hq + head;
  for (var ch = 0u; ch < (DN + SB - 1u) / SB; ch++) {
    if (mx) {
#for rr RPS
#for cl DNS
      if ((part * DNS + {cl}u) / SB == ch) {
        subgroupMatrixStore<row_major>(&sf[(fb + {rr}u) * SB + (part * DNS + {cl}u) % SB], 0u, o{rr}_{cl}, SP4);
      }
#endfor
#endfor
    }
    workgroupBarrier();
    if (row_ok) {
      for (var c4 = 0u; c4 < CPI / 4u; c4++) {
        let col = c0 + 4u * TPR * c4;
        let d = ch * BC + col;  // head-dim column of O
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
    }
    workgroupBarrier();
  }
  if (row_ok && c0 == 0u) {
    lse[row] = select(neg_inf(), top + log(z), z > 0.0);
  }
}

