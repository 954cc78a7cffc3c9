// The `flash_fwd` interface: the Params struct and bindings every flash_fwd kernel declares, by
// #including this file (a user's kernel too). wgattn.registry reads the fields and bindings from
// here; wgattn.interfaces.flash_fwd fills them. Token-major f32 tensors; Hq % Hkv == 0.
// Define VEC4 (head_dim % 4 == 0) to read q, k, v and write out as vec4 rows: the same bytes.

struct Params {
#include "lib/packed_params.wgsl"
  max_seqlen_q: u32,    // the longest query sequence: the grid's row blocks cover it
  _pad0: u32,
  _pad1: u32,
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
// One buffer for both per-head parameters, so that a pass binds WebGPU's default 8 storage buffers.
@group(0) @binding(8) var<storage, read> alibi_sinks: array<f32>;    // [2, heads_q]: ALiBi slopes, then sinks
