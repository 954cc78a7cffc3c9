// The row that a pass's k-th group of `lanes` neighbouring lanes takes, for passes whose lanes
// read a row of f32 fragments (rows of 20 words: 16 columns and 4 of padding) as 16-byte vec4s,
// `lanes` of them a row: a permutation of each aligned block of 8 rows, so that a quarter-warp's
// 8 lanes read rows on disjoint banks. With 2 lanes a row a quarter-warp reads 8 words of each
// of 4 rows: rows 0-3 start at banks 0, 20, 8, 28 (0 and 3 overlap), rows 0, 2, 4, 6 at 0, 8,
// 16, 24 (and rows of 12 words, 8x8 fragments, likewise). With 4 lanes a row it reads 16 words
// of 2 rows: rows g and g + 1 overlap, g and g + 4 do not. Any other count: the rows in order.
// Used by flash_fwd.smx's softmax (on the H100, Chromium, one series: 86.4 -> 87.4 TFLOP/s at
// (4,16,2048,64), unchanged at (2,16,4096,128), causal) and varlen_bwd.smx's elementwise passes
// (88.6 -> 90.0 and 52.8 -> 53.5).
fn bank_row(k: u32, lanes: u32) -> u32 {
  if (lanes == 2u) {  // quarter-warps on rows 0, 2, 4, 6 | 1, 3, 5, 7
    return (k & ~7u) | ((k & 3u) << 1u) | ((k >> 2u) & 1u);
  }
  if (lanes == 4u) {  // quarter-warps on rows g, g + 4
    return (k & ~7u) | ((k >> 1u) & 3u) | ((k & 1u) << 2u);
  }
  return k;
}
