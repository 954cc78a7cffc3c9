// The flash_fwd subgroup-matrix kernels' shared helpers (flash_fwd.smx, flash_fwd.smx_wide), at
// module scope after the interface's header: the vec4 loads of q, k and v, zeros past head_dim
// (VEC4: whole vec4 rows; else lib/flash_fwd_loads.wgsl's element loads), and frag_at, where an
// element of a block of fragments lives.
#if VEC4
fn load_q(row: u32, c: u32, dim: u32) -> vec4<f32> {
  if (c * 4u >= dim) {
    return vec4<f32>(0.0);
  }
  return q[row * (dim / 4u) + c];
}
fn load_kv(from_v: bool, row: u32, c: u32, dim: u32) -> vec4<f32> {
  if (c * 4u >= dim) {
    return vec4<f32>(0.0);
  }
  if (from_v) {
    return v[row * (dim / 4u) + c];
  }
  return k[row * (dim / 4u) + c];
}
#else
#include "lib/flash_fwd_loads.wgsl"
#endif

// Element (row, col) of a block of fragments of `cols` columns and `w`-wide fragments with row
// stride `p4` vec4: (fragment, vec4 index in it) for the 4 columns col..col+3 (col % 4 == 0).
fn frag_at(row: u32, col: u32, h: u32, w: u32, p4: u32, per_row_block: u32) -> vec2<u32> {
  return vec2<u32>((row / h) * per_row_block + col / w, (row % h) * p4 + (col % w) / 4u);
}
