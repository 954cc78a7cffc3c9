// Where an element of a block of subgroup-matrix fragments lives, for the kernels that keep their
// workgroup operands as arrays of fragments (flash_fwd.smx, flash_fwd.smx_wide, paged_prefill.smx):
// element (row, col) of a block of `w`-wide, `h`-high fragments, `per_row_block` of them a row
// of fragments, row stride `p4` vec4, is (fragment, vec4 index in it) for the 4 columns
// col..col+3 (col % 4 == 0).
fn frag_at(row: u32, col: u32, h: u32, w: u32, p4: u32, per_row_block: u32) -> vec2<u32> {
  return vec2<u32>((row / h) * per_row_block + col / w, (row % h) * p4 + (col % w) / 4u);
}
