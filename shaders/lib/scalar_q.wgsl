// Vec4 column c of token-major row `row` (token * heads + head) of q where the interface's header
// declares q an f32 array (head_dim % 4 != 0), zeros past head_dim `dim`. A kernel whose q is a
// vec4 array writes its own (one vec4 load).
fn load_q(row: u32, c: u32, dim: u32) -> vec4<f32> {
  var x = vec4<f32>(0.0);
  for (var e = 0u; e < 4u; e++) {
    if (c * 4u + e < dim) {
      x[e] = q[row * dim + c * 4u + e];
    }
  }
  return x;
}
