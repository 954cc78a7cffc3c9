// The packed variable-length kernels' shared geometry (wgattn's contract, docs/contract.md): the
// diagonal, the visible band of keys, an empty row's -inf. Every packed kernel takes its masks
// from here (and from lib/varlen_tokens.wgsl, the band read per key), so a mask-edge fix is made
// once.

// -inf as an f32: WGSL has no infinity literal, and a constant bitcast to -inf is rejected (Tint),
// so it goes through a variable.
fn neg_inf() -> f32 {
  var bits = 0xff800000u;
  return bitcast<f32>(bits);
}

// The offset between query row i and key j on the diagonal: len_k - len_q when the causal
// diagonal is aligned bottom-right (FlashAttention's convention), 0 when top-left (PyTorch's).
fn diagonal_offset(len_q: i32, len_k: i32, align_top_left: u32) -> i32 {
  return select(len_k - len_q, 0, align_top_left != 0u);
}

// Keys [lo, hi) visible to query rows [row_first, row_last] (one row, or the union over a block):
// j >= i + offset - window_left (window_left >= 0), j <= i + offset + window_right (window_right >= 0).
fn visible_keys(row_first: i32, row_last: i32, offset: i32, len_k: i32,
                window_left: i32, window_right: i32) -> vec2<i32> {
  var lo = 0;
  var hi = len_k;
  if (window_left >= 0) {
    lo = max(lo, row_first + offset - window_left);
  }
  if (window_right >= 0) {
    hi = min(hi, row_last + offset + window_right + 1);
  }
  return vec2<i32>(lo, hi);
}
