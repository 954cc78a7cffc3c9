// flash_fwd.smx_wide: flash_fwd.smx's FlashAttention-2 forward on subgroup matrices for head dims
// whose tiles and registers flash_fwd.smx cannot hold (up to 512): the head dim is split over DS
// subgroups per block of query rows, for Q, Kᵀ, V and O alike. Same math, contract, layouts,
// reference and f16 rule as flash_fwd.smx (its header; wgattn's flash_fwd contract: packed varlen,
// GQA, (left, right) windows in both alignments, softcap, ALiBi, attention sinks, lse).
//
// Why another kernel: at D = 512 flash_fwd.smx's tile would keep a row block's 32 Q fragments and
// its share of 32 O accumulators in one subgroup's registers (over 255 a lane: local memory, several
// times slower on NVIDIA) and its key tile, S and V whole in workgroup memory (over 48 KiB).
// Here part p (0 .. DS-1) of row block f keeps Q's dims [p DP/DS, (p+1) DP/DS) (DKS fragments)
// and O's same dims (DNS accumulators): at D = 512, DS = 4, M = N = K = 16 that is 8 + 8
// fragments, 96 registers a lane. S is a sum over the parts: each stores its partial S fragments
// (its dims' share of Q Kᵀ) to workgroup memory and the softmax adds the DS partials as it reads S.
//
// Matrix shapes, work split and grid: flash_fwd.smx's (M x N x K from the adapter; one workgroup
// per (block of BR = RB * M query rows, sequence, query head), heads fastest, the longest causal
// blocks first), with WG = RB * DS * subgroup size invocations: subgroup s has row block s / DS,
// part s % DS. The softmax: invocation t < BR * TPR owns row t / TPR and every TPR-th vec4
// column of each tile from vec4 column t % TPR (TPR neighbouring lanes a row, combined by
// subgroupShuffleXor); with BC = 16 keys a tile there are fewer vec4 columns than invocations, so
// invocation t >= BR * TPR repeats the work of t % (BR * TPR) (same row, same values: its
// subgroup's shuffles stay uniform) and writes nothing there; in the O rescale and the final
// write, where each of a row's WG / BR invocations takes its own columns, it works too.
//
// Per key tile of BC keys (the band's last tile first, 3 barriers + one uniform load), the next
// tile's K and V in flight in registers (k{f}, v{f}) while this one is computed:
//   store K (f32 -> f16), fetch the next tile's | partial S = Q Kᵀ over this part's dims, stored
//   (f32) | V stored where K was (K is dead), fetch the next tile's; softmax: sum of the DS
//   partials, scale, softcap, ALiBi, mask, running max, P (f16) | rescale O if needed (rare)
//   | O += P V over this part's dims.
// V's fetch a tile ahead, not behind this tile's S alone: at D = 512 a tile's S phase does not
// hide the load, and the barrier after the softmax waited for it (on the H100 that barrier cost
// 40% of the time with V fetched during S; lab/fwd_ablation). Both prefetches take 2 * BC * DP /
// WG floats a lane (64 at 256 invocations), which is why the first tile has 2 row blocks: up to
// 255 registers a lane, where 4 row blocks (512 invocations) allow 128.
// The lazy rescale (threshold TAU), the sink at the end, O's rescale and final write through
// workgroup memory in chunks, and the robustness and alignment rules (fragment arrays, a matrix
// load or store takes a pointer to one inner array at offset 0 with a constant stride, every
// workgroup variable a multiple of 16 bytes; everything written out with #for, no register
// array) are flash_fwd.smx's: its header says why.
// Workgroup memory at D = 512, M = N = K = 16, BC = 16: RB = 2 (the first tile) needs 37,392
// bytes of the H100's 49,152 (K or V 25 KiB with the fragments' padding, partial S 10 KiB); RB = 4
// would need 49,168.
// Reference: wgattn.reference.varlen_attention_fwd, keywords mapped in wgattn/interfaces/flash_fwd.py.
#include "lib/subgroup_matrix.wgsl"

#include "lib/varlen.wgsl"
#include "lib/softcap.wgsl"
#include "lib/key_offsets.wgsl"

#include "lib/smx_fragments.wgsl"
const FR: u32 = max(max(SM, SN), SK);  // rows of a fragment of kv (Kᵀ: N keys, V: K keys, Q: M rows)
const FP4: u32 = max(KP4, NP4);        // its vec4 stride at most
// The counts the written-out code repeats, from the plan's defines: DS parts per row block;
// MAX_DKS = DP / K / DS Q fragments a part holds, MAX_DNS = DP / N / DS O fragments; MAX_SB =
// BC / N S fragments of a row block (each part computes all of them over its dims), MAX_PB =
// BC / K P fragments; MAX_CPI4 vec4 columns of a tile an invocation holds in the softmax
// (BC / TPR / 4); MAX_KVPI vec4 of a K (or V) tile it prefetches.
#const DS
#const MAX_DKS
#const MAX_DNS
#const MAX_SB
#const MAX_PB
#const MAX_CPI4
#const MAX_KVPI
const LOWEST: f32 = -3.4028234663852886e38;  // stands for -inf in the running max
const LOG2E: f32 = 1.4426950408889634;

alias LF = subgroup_matrix_left<f16, SK, SM>;    // Q and P fragments: M rows x K
alias RF = subgroup_matrix_right<f16, SN, SK>;   // Kᵀ (K dims x N keys) and V (K keys x N dims)
alias AF = subgroup_matrix_result<f32, SN, SM>;  // S and O: M rows x N

override WG: u32;    // invocations per workgroup: RB * DS * subgroup size
override RB: u32;    // row blocks: BR = RB * M; each has DS subgroups
override BC: u32;    // keys per tile, a multiple of N and K and of 4 * TPR
override DP: u32;    // head_dim padded to a multiple of 16 * DS (zeros past head_dim)
override TPR: u32;   // invocations per query row in the softmax: 1, 2 or 4, BR * TPR <= WG
override TAU: f32 = 5.5;   // lazy-rescale threshold (natural log): p <= exp(TAU) ~ 245
override BR: u32 = RB * SM;               // query rows per workgroup
override DK: u32 = DP / SK;               // Q and Kᵀ fragments along the head dim
override DN: u32 = DP / SN;               // O and V fragments along the head dim
override SB: u32 = BC / SN;               // S fragments per row block
override PB: u32 = BC / SK;               // P fragments per row block
override RPI: u32 = WG / BR;              // invocations per row in the O rescale and write
override KVN: u32 = max(SB * DK, PB * DN);  // fragments of kv: Kᵀ, or V, of a tile
override QC: u32 = KVN / RB;              // Q fragments per row block of a staged chunk of Q
override OC: u32 = DS * SB;               // O fragments per row block of a chunk through sf
override KVPI: u32 = (BC * DP / 4u + WG - 1u) / WG;    // vec4 of K (and of V) each invocation stages
override QPI: u32 = (BR * QC * SK / 4u + WG - 1u) / WG;  // vec4 of a Q chunk each invocation stages

// The interface: Params and bindings.
#include "interfaces/flash_fwd.wgsl"

// Fragment arrays: [fragment][row * stride + vec4 column]. Key tile fragment (n, c) holds keys
// n*N.. and dims c*K.. (column-major Kᵀ: one key a row); V fragment (kk, c) keys kk*K.., dims
// c*N..; P fragment (s, n) the rows of row block s; partial S fragment ((p * RB + s) * SB + n) part
// p's share of S fragment (s, n). kv holds Kᵀ, then V (and Q's chunks before the first tile); sf
// the partial S, and O's chunks on their way through a rescale or out.
var<workgroup> kv: array<array<vec4<f16>, FR * FP4 + FRAG_PAD4>, KVN>;
var<workgroup> pf: array<array<vec4<f16>, SM * KP4>, RB * PB>;
var<workgroup> sf: array<array<vec4<f32>, SM * SP4>, DS * RB * SB>;
// [0] = 1: some row's max grew by more than TAU in this tile (four words: flash_fwd.smx says why).
var<workgroup> rescale: array<atomic<u32>, 4>;

// load_q, load_kv (zeros past head_dim) and frag_at.
#include "lib/flash_fwd_smx_loads.wgsl"

// Vec4 e of the K (from_v: V) tile of BC keys from t0 (vec4 e is key e / (DP / 4)): f32, converted
// to f16 when stored (so that the prefetch does not wait for its loads), zeros past `hi` and past
// head_dim.
fn fetch_one(t0: i32, hi: i32, k_start: i32, hkv: u32, kvh: u32, dim: u32, e: u32, from_v: bool) -> vec4<f32> {
  let j = e / (DP / 4u);
  let c = e % (DP / 4u);
  if (e >= BC * DP / 4u || t0 + i32(j) >= hi) {
    return vec4<f32>(0.0);
  }
  let row = u32(k_start + t0 + i32(j)) * hkv + kvh;
  return load_kv(from_v, row, c, dim);
}

// Stores vec4 e of the tile (fetched by fetch_one) into kv: Kᵀ's fragments, or V's (to_v).
fn store_one(e: u32, x: vec4<f32>, to_v: bool) {
  if (e < BC * DP / 4u) {
    let j = e / (DP / 4u);
    let d = (e % (DP / 4u)) * 4u;
    var at: vec2<u32>;
    if (to_v) {
      at = frag_at(j, d, SK, SN, NP4, DN);
    } else {
      at = frag_at(j, d, SN, SK, KP4, DK);
    }
    kv[at.x][at.y] = vec4<f16>(x);
  }
}

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

  let sg = lid / sg_size;  // this subgroup: row block fb, part `part` of the head dim, when mx
  let fb = sg / DS;
  let part = sg % DS;
  let mx = sg < RB * DS;  // has matrix work
  // Softmax role: row r of the block, vec4 columns c0, c0 + 4 * TPR, .. of each tile; `own`
  // unless this invocation repeats another's row (see the header). In the O rescale and write,
  // row r's columns u, u + RPI, ... (vec4) of a chunk.
  let own = lid < BR * TPR;
  let r = (lid / TPR) % BR;
  let c0 = (lid % TPR) * 4u;
  let u = lid % TPR + TPR * (lid / (BR * TPR));
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

  // Q: staged as f16 through kv in chunks of QC fragments a row block, this part's fragments
  // (part * DKS + c) loaded into registers from the chunk that holds them.
#for c MAX_DKS
  var q{c}: LF;  // Q fragment part * DKS + {c} of row block fb
#endfor
  for (var ch = 0u; ch < (DK + QC - 1u) / QC; ch++) {
    for (var f = 0u; f < QPI; f++) {
      let e = lid + WG * f;
      if (e < BR * QC * SK / 4u) {
        let rr = e / (QC * SK / 4u);
        let col = (e % (QC * SK / 4u)) * 4u;
        var x = vec4<f32>(0.0);
        if (row0 + i32(rr) <= row_last) {
          x = load_q(u32(q_start + row0 + i32(rr)) * hq + head, (ch * QC * SK + col) / 4u, dim);
        }
        let at = frag_at(rr, col, SM, SK, KP4, QC);
        kv[at.x][at.y] = vec4<f16>(x);
      }
    }
    workgroupBarrier();
    if (mx) {
#for c MAX_DKS
      if ((part * MAX_DKS + {c}u) / QC == ch) {
        q{c} = subgroupMatrixLoad<LF, row_major>(&kv[fb * QC + (part * MAX_DKS + {c}u) % QC], 0u, KP4);
      }
#endfor
    }
    workgroupBarrier();
  }

  if (lid == 0u) {
    atomicStore(&rescale[0], 0u);
  }
  let cap = params.softcap;
  let scale = params.scale;
  let alibi = params.alibi_on != 0u;
  let slope = alibi_sinks[head];  // 0 without ALiBi
  let pos = i + offset;  // the row's diagonal position
  var m = LOWEST;  // the row's running max (the one p was taken against)
  var l = 0.0;     // this invocation's share of the row sum
#for cl MAX_DNS
  var o{cl}: AF;  // O fragment part * DNS + {cl} of row block fb (zeros)
#endfor

  // The key tiles from the band's last down to its first (flash_fwd.smx says why).
  let last = band.x + max((band.y - band.x + i32(BC) - 1) / i32(BC) - 1, 0) * i32(BC);
#for f MAX_KVPI
  var k{f} = fetch_one(last, band.y, k_start, hkv, kvh, dim, lid + WG * {f}u, false);
  var v{f} = fetch_one(last, band.y, k_start, hkv, kvh, dim, lid + WG * {f}u, true);
#endfor
  for (var t0 = last; t0 < band.y && t0 >= band.x; t0 -= i32(BC)) {
    let next = t0 - i32(BC);
    let next_hi = select(band.y, next, next < band.x);  // past the first tile: nothing to fetch
#for f MAX_KVPI
    store_one(lid + WG * {f}u, k{f}, false);
    k{f} = fetch_one(next, next_hi, k_start, hkv, kvh, dim, lid + WG * {f}u, false);  // in flight until the next tile
#endfor
    workgroupBarrier();  // K staged

    // This part's share of S = Q Kᵀ (its dims) for row block fb, to workgroup memory.
    if (mx) {
#for n MAX_SB
      {
        var acc = AF();
#for c MAX_DKS
        {
          let kt = subgroupMatrixLoad<RF, col_major>(&kv[{n}u * DK + part * MAX_DKS + {c}u], 0u, KP4);
          acc = subgroupMatrixMultiplyAccumulate(q{c}, kt, acc);
        }
#endfor
        subgroupMatrixStore<row_major>(&sf[(part * RB + fb) * SB + {n}u], 0u, acc, SP4);
      }
#endfor
    }
    workgroupBarrier();  // the partial S are in workgroup memory; K is no longer read

#for f MAX_KVPI
    store_one(lid + WG * {f}u, v{f}, true);
    v{f} = fetch_one(next, next_hi, k_start, hkv, kvh, dim, lid + WG * {f}u, true);  // in flight until the next tile
#endfor

    // Softmax over this invocation's columns of row r: S is the sum of the DS partials.
    var tile_max = LOWEST;
#for c4 MAX_CPI4
    var s{c4}: vec4<f32>;
    {
      let col = c0 + 4u * TPR * {c4}u;
      let at = frag_at(r, col, SM, SN, SP4, SB);
      var s = vec4<f32>(0.0);
#for p DS
      s += sf[{p}u * RB * SB + at.x][at.y];
#endfor
      s *= scale;
      if (cap > 0.0) {
        s = vec4<f32>(softcap_apply(s.x, cap), softcap_apply(s.y, cap), softcap_apply(s.z, cap),
                      softcap_apply(s.w, cap));
      }
      let j = vec4<i32>(t0 + i32(col)) + vec4<i32>(0, 1, 2, 3);
      if (alibi) {
        s -= slope * abs(key_offsets4(t0 + i32(col), pos));
      }
      s = select(vec4<f32>(LOWEST), s, (j >= vec4<i32>(lo)) & (j < vec4<i32>(hi)));
      s{c4} = s;
      tile_max = max(tile_max, max(max(s.x, s.y), max(s.z, s.w)));
    }
#endfor
#include "lib/smx_running_max.wgsl"
    var sum = 0.0;
#for c4 MAX_CPI4
    {
      let p = select(vec4<f32>(0.0), exp2((s{c4} - m) * LOG2E), s{c4} > vec4<f32>(LOWEST));
      sum += (p.x + p.y) + (p.z + p.w);
      if (own) {
        let at = frag_at(r, c0 + 4u * TPR * {c4}u, SM, SK, KP4, PB);
        pf[at.x][at.y] = vec4<f16>(p);
      }
    }
#endfor
    l = l * alpha + sum;

    // O *= alpha per row, through sf in chunks of OC fragments a row block (rare: see flash_fwd.smx).
    // The flag's uniform load is a barrier first: P and V are then in workgroup memory, and the
    // partial S no longer read.
    if (workgroupUniformLoad(&rescale[0]) != 0u) {
      for (var ch = 0u; ch < (DN + OC - 1u) / OC; ch++) {
        if (mx) {
#for cl MAX_DNS
          if ((part * MAX_DNS + {cl}u) / OC == ch) {
            subgroupMatrixStore<row_major>(&sf[fb * OC + (part * MAX_DNS + {cl}u) % OC], 0u, o{cl}, SP4);
          }
#endfor
        }
        workgroupBarrier();
        for (var c4 = u; c4 < OC * SN / 4u; c4 += RPI) {
          let at = frag_at(r, 4u * c4, SM, SN, SP4, OC);
          sf[at.x][at.y] *= alpha;
        }
        workgroupBarrier();
        if (mx) {
#for cl MAX_DNS
          if ((part * MAX_DNS + {cl}u) / OC == ch) {
            o{cl} = subgroupMatrixLoad<AF, row_major>(&sf[fb * OC + (part * MAX_DNS + {cl}u) % OC], 0u, SP4);
          }
#endfor
        }
        workgroupBarrier();
      }
      if (lid == 0u) {
        atomicStore(&rescale[0], 0u);  // read by all above; the next write is a tile away
      }
    }

    // O += P V for this part's head-dim fragments.
    if (mx) {
#for kk MAX_PB
      {
        let p = subgroupMatrixLoad<LF, row_major>(&pf[fb * PB + {kk}u], 0u, KP4);
#for cl MAX_DNS
        {
          let vt = subgroupMatrixLoad<RF, row_major>(&kv[{kk}u * DN + part * MAX_DNS + {cl}u], 0u, NP4);
          o{cl} = subgroupMatrixMultiplyAccumulate(p, vt, o{cl});
        }
#endfor
      }
#endfor
    }
    workgroupBarrier();  // P and V are no longer read
  }

  // Row sums, the sink, then O * exp(m - M) / z through sf in chunks of OC fragments a row block.
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
  for (var ch = 0u; ch < (DN + OC - 1u) / OC; ch++) {
    if (mx) {
#for cl MAX_DNS
      if ((part * MAX_DNS + {cl}u) / OC == ch) {
        subgroupMatrixStore<row_major>(&sf[fb * OC + (part * MAX_DNS + {cl}u) % OC], 0u, o{cl}, SP4);
      }
#endfor
    }
    workgroupBarrier();
    if (row_ok) {
      for (var c4 = u; c4 < OC * SN / 4u; c4 += RPI) {
        let d = ch * OC * SN + 4u * c4;  // head-dim column of O
        if (d < dim) {
          let at = frag_at(r, 4u * c4, SM, SN, SP4, OC);
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
  if (row_ok && own && c0 == 0u) {
    lse[row] = select(neg_inf(), top + log(z), z > 0.0);
  }
}
