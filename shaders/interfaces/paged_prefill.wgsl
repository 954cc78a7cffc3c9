// The `paged_prefill` interface: the Params struct and bindings every paged prefill kernel declares,
// by #including this file (a user's kernel too). wgattn.registry reads the fields and bindings from
// here; wgattn.interfaces.paged_prefill fills them. New tokens of each sequence (any number, up to
// its whole cache: chunked prefill) against a paged KV cache (wgattn.reference.decode_attention),
// in one pass: a workgroup per block of new tokens of one query head, K/V tiles gathered through
// the block table.
// Define F16 for a float16 cache (the adapter's shader-f16), VEC4 (head_dim % 4 == 0) to move q,
// the cache and out as vec4 rows: the same bytes.
#if F16
enable f16;
alias T = f16;
#else
alias T = f32;
#endif

struct Params {
  batch_size: u32,   // B
  new_tokens: u32,   // Sq_new >= 1: new token i of a sequence of n sits at n - Sq_new + i
  heads_q: u32,      // Hq
  heads_kv: u32,     // Hkv (Hq % Hkv == 0)
  head_dim: u32,     // D
  num_blocks: u32,   // blocks in the cache
  max_blocks: u32,   // columns of block_table
  block_size: u32,   // tokens per block (kernels take it as the override BS too: j / BS, j % BS)
  window_left: i32,  // keys j >= pos - window_left are visible; -1 unbounded
  softcap: f32,      // > 0: s = softcap * tanh(s / softcap); 0 off
  scale: f32,        // score scale
  sinks_on: u32,     // 1: sinks[h] joins each row's softmax denominator
}

#if VEC4
@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;         // [B, Sq_new, Hq, D / 4]
@group(0) @binding(1) var<storage, read> k_cache: array<vec4<T>>;     // [num_blocks, block_size, Hkv, D / 4]
@group(0) @binding(2) var<storage, read> v_cache: array<vec4<T>>;     // [num_blocks, block_size, Hkv, D / 4]
#else
@group(0) @binding(0) var<storage, read> q: array<f32>;               // [B, Sq_new, Hq, D]
@group(0) @binding(1) var<storage, read> k_cache: array<T>;           // [num_blocks, block_size, Hkv, D]
@group(0) @binding(2) var<storage, read> v_cache: array<T>;           // [num_blocks, block_size, Hkv, D]
#endif
@group(0) @binding(3) var<storage, read> block_table: array<i32>;     // [B, max_blocks]
@group(0) @binding(4) var<storage, read> seq_lens: array<i32>;        // [B]
// Per query head h: (alibi_slopes[h], sinks[h]), zeros where off (a zero slope adds exactly
// nothing; sinks_on says whether the sink counts). One buffer: a pass binds at most 8 storage
// buffers on an adapter with WebGPU's default limits.
@group(0) @binding(5) var<storage, read> head_params: array<vec2<f32>>;  // [Hq]
#if VEC4
@group(0) @binding(6) var<storage, read_write> out: array<vec4<f32>>; // [B, Sq_new, Hq, D / 4]
#else
@group(0) @binding(6) var<storage, read_write> out: array<f32>;       // [B, Sq_new, Hq, D]
#endif
@group(0) @binding(7) var<storage, read_write> lse: array<f32>;       // [B, Sq_new, Hq]: natural log
@group(0) @binding(8) var<uniform> params: Params;
