// The `flash_fwd` interface: the Params struct and bindings every flash_fwd kernel declares, by
// #including this file (a user's kernel too). wgattn.registry reads the fields and bindings from
// here; wgattn.interfaces.flash_fwd fills them. Token-major f32 tensors; Hq % Hkv == 0.
// Define VEC4 (head_dim % 4 == 0) to read q, k, v and write out as vec4 rows: the same bytes.

struct Params {
#include "lib/packed_params.wgsl"
  max_seqlen_q: u32,    // the longest query sequence: the grid's row blocks cover it
}

#if VEC4
@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;        // [total_q, heads_q, D / 4]
@group(0) @binding(1) var<storage, read> k: array<vec4<f32>>;        // [total_k, heads_kv, D / 4]
@group(0) @binding(2) var<storage, read> v: array<vec4<f32>>;        // [total_k, heads_kv, D / 4]
#else
@group(0) @binding(0) var<storage, read> q: array<f32>;              // [total_q, heads_q, D]
@group(0) @binding(1) var<storage, read> k: array<f32>;              // [total_k, heads_kv, D]
@group(0) @binding(2) var<storage, read> v: array<f32>;              // [total_k, heads_kv, D]
#endif
@group(0) @binding(3) var<storage, read> cu_seqlens_q: array<i32>;   // [batch_size + 1]
@group(0) @binding(4) var<storage, read> cu_seqlens_k: array<i32>;   // [batch_size + 1]
#if VEC4
@group(0) @binding(5) var<storage, read_write> out: array<vec4<f32>>;  // [total_q, heads_q, D / 4]
#else
@group(0) @binding(5) var<storage, read_write> out: array<f32>;      // [total_q, heads_q, D]
#endif
@group(0) @binding(6) var<storage, read_write> lse: array<f32>;      // [total_q, heads_q]: natural log
@group(0) @binding(7) var<uniform> params: Params;
