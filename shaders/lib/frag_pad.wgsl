// vec4<f16> after each f16 fragment of the arrays that K and V (flash_fwd.smx, smx_wide,
// paged_prefill.smx) or a backward tile (varlen_bwd.smx) are staged into. A fragment of 16 rows
// of 48 bytes is 768 bytes (8 x 32 = 256 on 8x8x8 fragments), a multiple of the 128 bytes that
// workgroup memory's 32 banks span, so unpadded every fragment starts at bank 0; the staging's
// stores, whose lanes run along the head dim across fragments at the same row, then put a
// half-warp's 16 lanes on 8 banks (4-way conflicts). 32 bytes more start successive fragments 8
// banks apart: the 16 lanes on 32 banks. On the H100 (Chromium, each beside the unpadded kernel
// in one series) it took flash_fwd.smx from 104 to 110 TFLOP/s at D = 128, flash_fwd.smx_wide
// from 58.1 to 61.7 at D = 512 and varlen_bwd.smx from 87.0 to 88.6 at D = 128. (Padding the f32
// fragments of S, read across two fragments by the softmax at D = 128, changed nothing.)
const FRAG_PAD4: u32 = 4u;
