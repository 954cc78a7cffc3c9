// flash_fwd.tiled_f16: flash_fwd.tiled (read its header for the maths, layout and work split) with
// the staged K/V tiles and each row's q held as f16 ("shader-f16"): half the workgroup memory and
// half the bytes per broadcast read, so twice the keys fit in a 16 KiB tile. Buffers stay f32.
// Arithmetic: scores take each q * k product in f16 and sum them in f32; P.V sums four p * v
// products in f16 and adds each such partial into the f32 accumulator o (l and m are f32 too):
// f16 arithmetic with f32 accumulation. Its error is judged against the float64 reference on
// f16-rounded inputs, with the error of a naive f16 implementation as the yardstick (see
// wgattn/conformance.py).

enable f16;

override WG: u32;             // query rows (= invocations) per workgroup
override D4: u32;             // vec4 columns of a row: ceil(head_dim / 4), at most MAX_D4
override BC: u32;             // keys per staged tile, a multiple of 4, at most MAX_BC
const MAX_D4: u32 = 64u;      // head_dim <= 256 (the registry refuses more)
const MAX_BC: u32 = 64u;
const LOWEST: f32 = -3.4028234663852886e38;  // stands for -inf in the running max

#include "lib/softcap.wgsl"

#include "interfaces/flash_fwd.wgsl"

var<workgroup> k_tile: array<vec4<f16>, BC * D4>;
var<workgroup> v_tile: array<vec4<f16>, BC * D4>;

fn neg_inf() -> f32 {
  // WGSL has no infinity literal, and a constant bitcast to -inf is rejected (Tint): go through
  // a variable.
  var bits = 0xff800000u;
  return bitcast<f32>(bits);
}

@compute @workgroup_size(WG)
fn flash_fwd(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
  // Everything up to the tile loop depends only on the workgroup: returns here are uniform.
  let w = wid.x + wid.y * nwg.x;
  let hq = params.heads_q;
  let nb = params.batch_size;
  if (nb == 0u) {
    return;
  }
  let head = w % hq;
  let b = (w / hq) % nb;
  let block = w / (hq * nb);
  let q_start = cu_seqlens_q[b];
  let len_q = cu_seqlens_q[b + 1u] - q_start;
  let k_start = cu_seqlens_k[b];
  let len_k = cu_seqlens_k[b + 1u] - k_start;
  let row0 = i32(block * WG);
  if (row0 >= len_q) {
    return;
  }
  let dim = params.head_dim;
  let hkv = params.heads_kv;
  let kvh = head / (hq / hkv);
  var offset = len_k - len_q;
  if (params.align_top_left != 0u) {
    offset = 0;
  }
  let wl = params.window_left;
  let wr = params.window_right;
  let row_last = min(row0 + i32(WG), len_q) - 1;
  // The keys any row of the block can see: [lo, hi).
  var lo = 0;
  var hi = len_k;
  if (wl >= 0) {
    lo = max(lo, row0 + offset - wl);
  }
  if (wr >= 0) {
    hi = min(hi, row_last + offset + wr + 1);
  }

  let i = row0 + i32(lid);
  let live = i <= row_last;
  var row_lo = 0;
  var row_hi = len_k;
  if (wl >= 0) {
    row_lo = max(row_lo, i + offset - wl);
  }
  if (wr >= 0) {
    row_hi = min(row_hi, i + offset + wr + 1);
  }

  // This row's q as f16, zero past D. Unscaled: an f16 input is then held exactly, and the
  // scale is applied to the f32 score.
  let q_base = (u32(q_start + i) * hq + head) * dim;
  var qr: array<vec4<f16>, MAX_D4>;
  var o: array<vec4<f32>, MAX_D4>;
  for (var c = 0u; c < D4; c++) {
    var x = vec4<f32>(0.0);
    if (live) {
      for (var e = 0u; e < 4u; e++) {
        let d = c * 4u + e;
        if (d < dim) {
          x[e] = q[q_base + d];
        }
      }
    }
    qr[c] = vec4<f16>(x);
    o[c] = vec4<f32>(0.0);
  }
  let cap = params.softcap;
  var m = LOWEST;
  var l = 0.0;

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
      k_tile[jj * D4 + d / 4u][d % 4u] = f16(kx);
      v_tile[jj * D4 + d / 4u][d % 4u] = f16(vx);
    }
    workgroupBarrier();
    // Not `continue`: the loop holds barriers, so its control flow must stay uniform.
    if (live) {
      // Scores of the tile; two partial sums per dot product keep long head dims accurate.
      var s: array<f32, MAX_BC>;
      var tile_max = LOWEST;
      for (var jj = 0u; jj < BC; jj++) {
        let j = t0 + i32(jj);
        // Products in f16, summed in f32: four partial sums, one per vec4 lane.
        var acc = vec4<f32>(0.0);
        for (var c = 0u; c < D4; c++) {
          acc += vec4<f32>(qr[c] * k_tile[jj * D4 + c]);
        }
        var x = ((acc.x + acc.y) + (acc.z + acc.w)) * params.scale;
        if (cap > 0.0) {
          x = softcap_apply(x, cap);
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
