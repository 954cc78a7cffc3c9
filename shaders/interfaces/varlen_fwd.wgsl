// The `varlen_fwd` interface, the original varlen_fwd kernel's: packed variable-length attention
// forward with LSE, no GQA.
// Every varlen_fwd kernel (a user's too) declares its Params struct and bindings by #including
// this file; wgattn.registry reads the fields and bindings from here, wgattn.interfaces.varlen_fwd
// fills them.

struct Params {
  total_tokens_q: u32,  // rows of q, out and lse
  total_tokens_k: u32,  // rows of k and v
  num_heads: u32,       // H, query and key/value heads alike (the interface has no GQA)
  head_dim: u32,        // D, any value >= 1
  batch_size: u32,      // sequences: cu_seqlens_* hold batch_size + 1 entries
  causal: u32,          // 1: top-left causal mask, 0: every key of the sequence
  scale: f32,           // score scale (the host's default is 1/sqrt(D))
  _pad: u32,            // pads the struct to 32 bytes
}

@group(0) @binding(0) var<storage, read> q: array<f32>;             // [total_tokens_q, H, D]
@group(0) @binding(1) var<storage, read> k: array<f32>;             // [total_tokens_k, H, D]
@group(0) @binding(2) var<storage, read> v: array<f32>;             // [total_tokens_k, H, D]
@group(0) @binding(3) var<storage, read> cu_seqlens_q: array<i32>;  // query prefix sums
@group(0) @binding(4) var<storage, read> cu_seqlens_k: array<i32>;  // key prefix sums
@group(0) @binding(5) var<storage, read_write> out: array<f32>;     // [total_tokens_q, H, D]
@group(0) @binding(6) var<storage, read_write> lse: array<f32>;     // [total_tokens_q, H]
@group(0) @binding(7) var<uniform> params: Params;                 // sizes, causal, scale
