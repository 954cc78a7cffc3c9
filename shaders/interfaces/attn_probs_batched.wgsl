// The `attn_probs_batched` interface, the probabilities of many query positions over one key history; q and k_hist as
// vec4 rows zero-padded past head_dim by the host.
// Every attn_probs_batched kernel (a user's too) declares its Params struct and bindings by #including
// this file; wgattn.registry reads the fields and bindings from here, wgattn.interfaces.attn_probs_batched
// fills them.

struct Params {
  head_dim: u32,      // D (q and k_hist rows hold ceil(D / 4) vec4s, zero-padded)
  n_heads: u32,       // Hq, query heads
  n_kv_heads: u32,    // Hkv, key heads; Hq = Hkv * heads_per_kv
  heads_per_kv: u32,  // query heads sharing one key head: head h reads key head h / heads_per_kv
  n_pos: u32,         // query positions (rows of q and positions)
  history_len: u32,   // keys in k_hist (and columns of probs)
  window: u32,        // visible keys including the current one; 0 = unbounded
  scale: f32,         // score scale (1.0: un-scaled, Gemma style)
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;        // [n_pos, n_heads, D4]
@group(0) @binding(2) var<storage, read> k_hist: array<vec4<f32>>;   // [history_len, n_kv_heads, D4]
@group(0) @binding(3) var<storage, read> positions: array<u32>;      // [n_pos]
@group(0) @binding(4) var<storage, read_write> probs: array<f32>;    // [n_pos, n_heads, history_len]
