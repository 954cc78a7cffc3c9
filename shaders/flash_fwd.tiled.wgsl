// flash_fwd.tiled (and flash_fwd.tiled_f16, define F16): FlashAttention-2 forward over packed variable-length sequences, wgattn's
// contract: GQA, (left, right) windows in both alignments, softcap, ALiBi, attention sinks, out and
// a natural-log lse.
//
//   Per sequence b, query row i (head h), key j (kv head g = h / (heads_q / heads_kv)):
//     s0_ij = scale * q_i . k_j;  s_ij = softcap * tanh(s0_ij / softcap) if softcap > 0 else s0_ij
//     s_ij -= slope_h * |j - (i + offset)|                        (alibi_on; slope_h = alibi_sinks[h])
//     z_i = sum_j exp(s_ij) over visible j  (+ exp(sink_h) with sinks_on; sink_h = alibi_sinks[heads_q + h])
//     out_i = sum_j exp(s_ij) / z_i v_j over visible j;  lse_i = log z_i
//   Visible: with offset = len_k - len_q (bottom-right, align_top_left == 0) or 0 (top-left),
//     (window_left < 0 or j >= i + offset - window_left) and (window_right < 0 or j <= i + offset + window_right);
//     causal is folded in by the host (window_right = min(right, 0), -1 -> 0).
//   A row with no visible key gets out = 0 and lse = -inf (sink_h with sinks_on). The sink enters as
//   the online softmax's starting state: running max m = sink_h, sum l = 1, o = 0 (a key whose
//   value is 0).
//
// Layout (token-major, f32): q, out [total_q, heads_q, D]; k, v [total_k, heads_kv, D];
// lse [total_q, heads_q]; cu_seqlens_* [batch_size + 1].
//
// Work split: one workgroup per (block of WG query rows, sequence, query head), heads fastest so
// that the query heads of one kv group run side by side and share K/V through the cache. One
// invocation owns one query row: its q, its running max m, sum l and accumulator o live in
// registers, so the online softmax needs no reduction between invocations. The workgroup stages
// BC keys (and values) at a time in workgroup memory; every invocation reads the same key at the
// same time (a broadcast), one vec4 load per four multiply-adds. Key tiles lie inside the union of
// the rows' visible bands: tiles that the causal mask or the window removes for every row of the
// block are never loaded. Within a tile, scores are taken for all BC keys first, then the running
// max moves once per tile (one rescale of o per tile, not per key).
// Tile shapes are override constants: D4 = ceil(D / 4) vec4 columns (so loops over the head dim
// have a constant trip count and unroll into registers), BC keys per tile (2 * BC * D4 * 16 bytes
// of workgroup memory; the registry picks BC for 16 KiB). The row's registers hold MAX_D4 vec4
// (a define: 64 up to head_dim 256, 128 up to 512), so head dims up to 256 keep the register
// arrays they always had.
// Reference: wgattn.reference.varlen_attention_fwd, keywords mapped in wgattn/interfaces/flash_fwd.py.
//
// F16 (flash_fwd.tiled_f16, "shader-f16"): the staged K/V tiles and each row's q held as f16, half
// the workgroup memory and half the bytes per broadcast read, so twice the keys fit in a 16 KiB
// tile; buffers stay f32. Scores take each q * k product in f16 and sum them in f32; P.V sums four
// p * v products in f16 and adds each such partial into the f32 accumulator o (l and m are f32 too):
// f16 arithmetic with f32 accumulation, judged against the float64 reference on f16-rounded inputs
// with a naive f16 implementation's error as the yardstick (wgattn/conformance.py). BC is then a
// multiple of 4.
#if F16
enable f16;
#endif

override WG: u32;             // query rows (= invocations) per workgroup
override BR: u32 = WG;        // query rows per workgroup: one per invocation
override D4: u32;             // vec4 columns of a row: ceil(head_dim / 4), at most MAX_D4
override BC: u32;             // keys per staged tile, at most MAX_BC
#const MAX_D4
const MAX_BC: u32 = 64u;
const LOWEST: f32 = -3.4028234663852886e38;  // stands for -inf in the running max

#include "lib/varlen.wgsl"
#include "lib/softcap.wgsl"

#include "interfaces/flash_fwd.wgsl"

#if F16
var<workgroup> k_tile: array<vec4<f16>, BC * D4>;
var<workgroup> v_tile: array<vec4<f16>, BC * D4>;
#else
var<workgroup> k_tile: array<vec4<f32>, BC * D4>;
var<workgroup> v_tile: array<vec4<f32>, BC * D4>;
#endif

@compute @workgroup_size(WG)
fn flash_fwd(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  #include "lib/flash_fwd_grid.wgsl"
  let block = w / (hq * nb);
  #include "lib/flash_fwd_block.wgsl"
  // The keys any row of the block can see: [lo, hi).
  let lo = band.x;
  let hi = band.y;

  // This invocation's row and the keys it sees: [row_lo, row_hi).
  let i = row0 + i32(lid);
  let live = i <= row_last;
  let row_band = visible_keys(i, i, offset, len_k, wl, wr);
  let row_lo = row_band.x;
  let row_hi = row_band.y;

  // This row's q, zero past D: pre-scaled in f32 (softcap, when on, applies to the scaled score);
  // unscaled in f16, so that an f16 input is held exactly (the scale goes to the f32 score).
  let q_base = (u32(q_start + i) * hq + head) * dim;
#if F16
  var qr: array<vec4<f16>, MAX_D4>;
#else
  var qr: array<vec4<f32>, MAX_D4>;
#endif
  var o: array<vec4<f32>, MAX_D4>;
  for (var c = 0u; c < D4; c++) {
    var x = vec4<f32>(0.0);
    if (live) {
      for (var e = 0u; e < 4u; e++) {
        let d = c * 4u + e;
        if (d < dim) {
#if F16
          x[e] = q[q_base + d];
#else
          x[e] = q[q_base + d] * params.scale;
#endif
        }
      }
    }
#if F16
    qr[c] = vec4<f16>(x);
#else
    qr[c] = x;
#endif
    o[c] = vec4<f32>(0.0);
  }
  let cap = params.softcap;
  let alibi = params.alibi_on != 0u;
  let slope = alibi_sinks[head];
  let pos = i + offset;  // the row's position on the diagonal, ALiBi's origin
  // The sink as the starting state (m = sink, l = exp(sink - m) = 1); without one, nothing yet.
  let sinks = params.sinks_on != 0u;
  var m = select(LOWEST, alibi_sinks[hq + head], sinks);
  var l = select(0.0, 1.0, sinks);

  let tile_elems = BC * D4 * 4u;
  for (var t0 = lo; t0 < hi; t0 += i32(BC)) {
    workgroupBarrier();  // the previous tile is no longer read
    for (var e = lid; e < tile_elems; e += WG) {
      let jj = e / (D4 * 4u);
      let d = e % (D4 * 4u);
      let j = t0 + i32(jj);
      var kx = 0.0;
      var vx = 0.0;
      if (j < hi && d < dim) {
        let at = (u32(k_start + j) * hkv + kvh) * dim + d;
        kx = k[at];
        vx = v[at];
      }
#if F16
      k_tile[jj * D4 + d / 4u][d % 4u] = f16(kx);
      v_tile[jj * D4 + d / 4u][d % 4u] = f16(vx);
#else
      k_tile[jj * D4 + d / 4u][d % 4u] = kx;
      v_tile[jj * D4 + d / 4u][d % 4u] = vx;
#endif
    }
    workgroupBarrier();
    // Not `continue`: the loop holds barriers, so its control flow must stay uniform.
    if (live) {
      // Scores of the tile; two partial sums per dot product keep long head dims accurate.
      var s: array<f32, MAX_BC>;
      var tile_max = LOWEST;
      for (var jj = 0u; jj < BC; jj++) {
        let j = t0 + i32(jj);
#if F16
        // Products in f16, summed in f32: four partial sums, one per vec4 lane.
        var acc = vec4<f32>(0.0);
        for (var c = 0u; c < D4; c++) {
          acc += vec4<f32>(qr[c] * k_tile[jj * D4 + c]);
        }
        var x = ((acc.x + acc.y) + (acc.z + acc.w)) * params.scale;
#else
        var even = 0.0;
        var odd = 0.0;
        for (var c = 0u; c < D4; c++) {
          let x = dot(qr[c], k_tile[jj * D4 + c]);
          if ((c & 1u) == 0u) {
            even += x;
          } else {
            odd += x;
          }
        }
        var x = even + odd;
#endif
        if (cap > 0.0) {
          x = softcap_apply(x, cap);
        }
        if (alibi) {
          x -= slope * f32(abs(j - pos));
        }
        if (j >= row_lo && j < row_hi) {
          s[jj] = x;
          tile_max = max(tile_max, x);
        } else {
          s[jj] = LOWEST;
        }
      }
      if (tile_max != LOWEST) {  // some key of this tile is visible to this row
        let m_new = max(m, tile_max);
        let alpha = exp(m - m_new);
        var tile_sum = 0.0;
        for (var c = 0u; c < D4; c++) {
          o[c] *= alpha;
        }
#if F16
        for (var jj = 0u; jj < BC; jj += 4u) {
          // A masked key holds LOWEST: exp(LOWEST - m_new) is 0 since m_new is a visible score.
          let p = exp(vec4<f32>(s[jj], s[jj + 1u], s[jj + 2u], s[jj + 3u]) - m_new);
          tile_sum += (p.x + p.y) + (p.z + p.w);
          let ph = vec4<f16>(p);
          for (var c = 0u; c < D4; c++) {
            let at = jj * D4 + c;
            o[c] += vec4<f32>(ph.x * v_tile[at] + ph.y * v_tile[at + D4]
                              + ph.z * v_tile[at + 2u * D4] + ph.w * v_tile[at + 3u * D4]);
          }
        }
#else
        for (var jj = 0u; jj < BC; jj++) {
          // A masked key holds LOWEST: exp(LOWEST - m_new) is 0 since m_new is a visible score.
          let p = exp(s[jj] - m_new);
          tile_sum += p;
          for (var c = 0u; c < D4; c++) {
            o[c] += p * v_tile[jj * D4 + c];
          }
        }
#endif
        l = l * alpha + tile_sum;
        m = m_new;
      }
    }
  }

  if (!live) {
    return;
  }
  let o_base = (u32(q_start + i) * hq + head) * dim;
  let lse_at = u32(q_start + i) * hq + head;
  if (l > 0.0) {
    let inv = 1.0 / l;
    for (var c = 0u; c < D4; c++) {
      for (var e = 0u; e < 4u; e++) {
        let d = c * 4u + e;
        if (d < dim) {
          out[o_base + d] = o[c][e] * inv;
        }
      }
    }
    lse[lse_at] = m + log(l);
  } else {
    for (var d = 0u; d < dim; d++) {
      out[o_base + d] = 0.0;
    }
    lse[lse_at] = neg_inf();
  }
}
