// The flash_fwd kernels' loads when head_dim % 4 != 0 (VEC4 off: q, k, v are f32 arrays, the
// interface's header declares them): vec4 column c of token-major row `row` (token * heads + head)
// of q (lib/scalar_q.wgsl), or of k or v (from_v picks), zeros past head_dim. A kernel with VEC4
// writes its own (a vec4 load; zeros past its padded head dim where it pads).
#include "lib/scalar_q.wgsl"
fn load_kv(from_v: bool, row: u32, c: u32, dim: u32) -> vec4<f32> {
  var x = vec4<f32>(0.0);
  for (var e = 0u; e < 4u; e++) {
    if (c * 4u + e < dim) {
      if (from_v) {
        x[e] = v[row * dim + c * 4u + e];
      } else {
        x[e] = k[row * dim + c * 4u + e];
      }
    }
  }
  return x;
}
