// Statements, not declarations: how a flash_fwd workgroup finds its query block, written once and
// #included inside each kernel's entry point, where `head`, `hq`, `b` (its sequence) and `block`
// (its block of BR query rows) are already known. It declares the sequence's bounds (q_start,
// len_q, k_start, len_k), the block's rows [row0, row_last], dim, hkv and the K/V head kvh, the
// diagonal offset, the window (wl, wr) and band: the keys [band.x, band.y) that any row of the
// block sees. A block that starts past its sequence's end returns (uniformly: all of this depends
// on the workgroup only). Its kernel includes, at module scope, the interface's header and
// lib/varlen.wgsl.
  let q_start = cu_seqlens_q[b];
  let len_q = cu_seqlens_q[b + 1u] - q_start;
  let k_start = cu_seqlens_k[b];
  let len_k = cu_seqlens_k[b + 1u] - k_start;
  let row0 = i32(block * BR);
  if (row0 >= len_q) {
    return;
  }
  let dim = params.head_dim;
  let hkv = params.heads_kv;
  let kvh = head / (hq / hkv);
  let offset = diagonal_offset(len_q, len_k, params.align_top_left);
  let wl = params.window_left;
  let wr = params.window_right;
  let row_last = min(row0 + i32(BR), len_q) - 1;
  let band = visible_keys(row0, row_last, offset, len_k, wl, wr);
