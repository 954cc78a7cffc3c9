// Statements, not declarations: which query head and sequence a flash_fwd workgroup serves, written
// once and #included first in each kernel's entry point (whose builtins are named wid and nwg).
// Workgroup w (the grid folded past 65535 into y) serves head w % heads_q of sequence
// (w / heads_q) % batch_size, heads fastest so that the query heads of one K/V head run side by
// side; w / (heads_q * batch_size) is left to the kernel to map to its block of query rows
// (`block`, then lib/flash_fwd_block.wgsl). Declares w, hq, nb, head and b.
  // Everything up to the tile loop depends only on the workgroup: returns here are uniform.
  let w = wid.x + wid.y * nwg.x;
  let hq = params.heads_q;
  let nb = params.batch_size;
  if (nb == 0u) {
    return;
  }
  let head = w % hq;
  let b = (w / hq) % nb;
