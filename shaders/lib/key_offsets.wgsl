// j - pos as f32 for four consecutive keys j = j0 .. j0 + 3 (the ALiBi bias's distance, `pos` the
// query's diagonal position): one int-to-float conversion for the four, then exact adds. The
// conversion runs at an eighth of the f32 rate on NVIDIA's recent GPUs (16 a clock an SM against
// 128), so the per-key conversion it replaces was a visible share of a 16-key tile's softmax.
// The same values as converting each difference while |j0 - pos| + 3 <= 2^24.
fn key_offsets4(j0: i32, pos: i32) -> vec4<f32> {
  return vec4<f32>(f32(j0 - pos)) + vec4<f32>(0.0, 1.0, 2.0, 3.0);
}
