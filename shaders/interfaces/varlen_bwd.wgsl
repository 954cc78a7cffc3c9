// The `varlen_bwd` interface: the Params struct and bindings every varlen_bwd kernel declares, by
// #including this file (a user's kernel too). wgattn.registry reads the fields and bindings from
// here; wgattn.interfaces.varlen_bwd fills them. Token-major f32 tensors; Hq % Hkv == 0.
// Define VEC4 (head_dim % 4 == 0) to read and write the [.., D] tensors as vec4 rows: the same bytes.

struct Params {
#include "lib/packed_params.wgsl"
  max_seqlen: u32,      // the longest query or key sequence: a grid of blocks per sequence covers it
  _pad0: u32,
  _pad1: u32,
}

#if VEC4
@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;        // [total_q, heads_q, D / 4]
@group(0) @binding(1) var<storage, read> k: array<vec4<f32>>;        // [total_k, heads_kv, D / 4]
@group(0) @binding(2) var<storage, read> v: array<vec4<f32>>;        // [total_k, heads_kv, D / 4]
@group(0) @binding(3) var<storage, read> out: array<vec4<f32>>;      // [total_q, heads_q, D / 4]
@group(0) @binding(4) var<storage, read> dout: array<vec4<f32>>;     // [total_q, heads_q, D / 4]
#else
@group(0) @binding(0) var<storage, read> q: array<f32>;              // [total_q, heads_q, D]
@group(0) @binding(1) var<storage, read> k: array<f32>;              // [total_k, heads_kv, D]
@group(0) @binding(2) var<storage, read> v: array<f32>;              // [total_k, heads_kv, D]
@group(0) @binding(3) var<storage, read> out: array<f32>;            // forward output [total_q, heads_q, D]
@group(0) @binding(4) var<storage, read> dout: array<f32>;           // gradient into out [total_q, heads_q, D]
#endif
@group(0) @binding(5) var<storage, read> cu_seqlens_q: array<i32>;   // query prefix sums [batch_size + 1]
@group(0) @binding(6) var<storage, read> cu_seqlens_k: array<i32>;   // key prefix sums [batch_size + 1]
// stats: [2, total_q, heads_q] lse, delta (the kernel's first pass writes delta), then [2, heads_q]
// the ALiBi slopes (0 without) and the sinks: a pass that reads the slopes binds no extra buffer.
@group(0) @binding(7) var<storage, read_write> stats: array<f32>;
#if VEC4
@group(0) @binding(8) var<storage, read_write> dq: array<vec4<f32>>;   // [total_q, heads_q, D / 4]
@group(0) @binding(9) var<storage, read_write> dkv: array<vec4<f32>>;  // [2, total_k, heads_kv, D / 4]
#else
@group(0) @binding(8) var<storage, read_write> dq: array<f32>;       // [total_q, heads_q, D]
@group(0) @binding(9) var<storage, read_write> dkv: array<f32>;      // [2, total_k, heads_kv, D]: dk, dv
#endif
@group(0) @binding(10) var<uniform> params: Params;
@group(0) @binding(11) var<storage, read_write> dsinks: array<f32>;  // [heads_q]: the sinks' gradient

// The ALiBi slope of query head h (0 without ALiBi): stats holds the slopes after lse and delta.
fn alibi_slope(h: u32) -> f32 {
  return stats[2u * params.total_q * params.heads_q + h];
}

// The sinks' gradient, a pass of the interface (not of a kernel): it needs only lse and delta.
#include "lib/varlen_bwd_dsinks.wgsl"
