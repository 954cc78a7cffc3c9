// The `attn_probs` interface, the original attn_probs kernel's: the probabilities of one query
// position over a key history.
// Every attn_probs kernel (a user's too) declares its Params struct and bindings by #including
// this file; wgattn.registry reads the fields and bindings from here, wgattn.interfaces.attn_probs
// fills them.

struct Params {
  head_dim: u32,      // D
  n_heads: u32,       // Hq, query heads (the grid's workgroup count)
  n_kv_heads: u32,    // Hkv, key heads; Hq = Hkv * heads_per_kv
  heads_per_kv: u32,  // query heads sharing one key head: head h reads key head h / heads_per_kv
  pos: u32,           // position of the current token, 0 <= pos < history_len
  history_len: u32,   // keys in k_hist (and columns of probs)
  window: u32,        // visible keys including the current one; 0 = unbounded
  _pad: u32,          // pads Params to 32 bytes
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;             // [n_heads, head_dim]
@group(0) @binding(2) var<storage, read> k_hist: array<f32>;        // [history_len, n_kv_heads, head_dim]
@group(0) @binding(3) var<storage, read_write> probs: array<f32>;   // [n_heads, history_len]
