// The Params fields that the packed variable-length interfaces share (flash_fwd, varlen_bwd),
// included at the top of their Params structs (interfaces/flash_fwd.wgsl, interfaces/varlen_bwd.wgsl).
  total_q: u32,         // query tokens over all sequences
  total_k: u32,         // key tokens over all sequences
  heads_q: u32,         // query heads Hq
  heads_kv: u32,        // key/value heads Hkv (Hq % Hkv == 0)
  head_dim: u32,        // D
  batch_size: u32,      // sequences; cu_seqlens_* hold batch_size + 1 entries
  window_left: i32,     // keys j >= i + offset - window_left are visible; -1 unbounded
  window_right: i32,    // keys j <= i + offset + window_right are visible; -1 unbounded (causal: 0)
  align_top_left: u32,  // 1: offset 0 (top-left); 0: offset len_k - len_q (bottom-right)
  softcap: f32,         // > 0: s = softcap * tanh(s0 / softcap); 0 off
  scale: f32,           // score scale
  alibi_on: u32,        // 1: s -= alibi_slopes[h] * |j - (i + offset)| after softcap (the slopes are 0 without)
  sinks_on: u32,        // 1: sinks[h] joins every row's softmax denominator (and its lse)
