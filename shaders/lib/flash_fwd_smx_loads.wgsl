// The flash_fwd subgroup-matrix kernels' shared helpers (flash_fwd.smx, flash_fwd.smx_wide), at
// module scope after the interface's header: the vec4 loads of q, k and v, zeros past head_dim
// (VEC4: whole vec4 rows; else lib/flash_fwd_loads.wgsl's element loads), and lib/frag_at.wgsl.
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

#include "lib/frag_at.wgsl"
