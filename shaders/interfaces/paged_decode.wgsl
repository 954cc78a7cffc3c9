// The `paged_decode` interface: the Params struct and bindings every decode kernel declares, by
// #including this file first (a user's kernel too). wgattn.registry reads the fields and bindings
// from here; wgattn.interfaces.paged_decode fills them. Decode attention over a paged KV cache
// (wgattn.reference.decode_attention), in two passes: each split of a sequence's keys writes a
// partial softmax state (part_o, part_ml), the combine merges them by log-sum-exp.
// Define F16 for a float16 cache (T = f16; the adapter's shader-f16), VEC4 (head_dim % 4 == 0)
// to move q, the cache and out as vec4 rows, and with both PACK8 (head_dim % 8 == 0) to read the
// f16 cache as vec4<u32> words of 8 halves: the same bytes.
#if F16
enable f16;
alias T = f16;
#else
alias T = f32;
#endif

struct Params {
  batch_size: u32,   // B
  new_tokens: u32,   // Sq_new, 1..16
  heads_q: u32,      // Hq
  heads_kv: u32,     // Hkv (Hq % Hkv == 0)
  head_dim: u32,     // D
  num_blocks: u32,   // blocks in the cache
  max_blocks: u32,   // columns of block_table
  window_left: i32,  // keys j >= pos - window_left are visible; -1 unbounded
  softcap: f32,      // > 0: s = softcap * tanh(s / softcap); 0 off
  scale: f32,        // score scale
  sinks_on: u32,     // 1: sinks[h] joins each row's softmax denominator
  num_splits: u32,   // splits per (sequence, kv head, row block)
  row_blocks: u32,   // ceil(Sq_new * G / RB)
  block_size: u32,   // tokens per cache block
  block_shift: u32,  // log2(block_size) when it is a power of two (POW2_BLOCKS), else 0
  _pad0: u32,
}

#if VEC4
@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;         // [B, Sq_new, Hq, D / 4]
#if PACK8
// An f16 cache with head_dim % 8 == 0 seen as 16-byte words of 8 halves (unpack2x16float):
// one load moves 16 bytes, where a vec4<f16> moves 8. The same bytes as vec4<f16>.
@group(0) @binding(1) var<storage, read> k_cache: array<vec4<u32>>;   // [num_blocks, block_size, Hkv, D / 8]
@group(0) @binding(2) var<storage, read> v_cache: array<vec4<u32>>;   // [num_blocks, block_size, Hkv, D / 8]
#else
@group(0) @binding(1) var<storage, read> k_cache: array<vec4<T>>;     // [num_blocks, block_size, Hkv, D / 4]
@group(0) @binding(2) var<storage, read> v_cache: array<vec4<T>>;     // [num_blocks, block_size, Hkv, D / 4]
#endif
#else
@group(0) @binding(0) var<storage, read> q: array<f32>;               // [B, Sq_new, Hq, D]
@group(0) @binding(1) var<storage, read> k_cache: array<T>;           // [num_blocks, block_size, Hkv, D]
@group(0) @binding(2) var<storage, read> v_cache: array<T>;           // [num_blocks, block_size, Hkv, D]
#endif
@group(0) @binding(3) var<storage, read> block_table: array<i32>;     // [B, max_blocks]
@group(0) @binding(4) var<storage, read> seq_lens: array<i32>;        // [B]
@group(0) @binding(5) var<storage, read> alibi_slopes: array<f32>;    // [Hq]
@group(0) @binding(6) var<storage, read> sinks: array<f32>;           // [Hq]
@group(0) @binding(7) var<storage, read_write> part_o: array<vec4<f32>>;  // [rows, num_splits, D4]
@group(0) @binding(8) var<storage, read_write> part_ml: array<vec2<f32>>; // [rows, num_splits]
#if VEC4
@group(0) @binding(9) var<storage, read_write> out: array<vec4<f32>>; // [B, Sq_new, Hq, D / 4]
#else
@group(0) @binding(9) var<storage, read_write> out: array<f32>;       // [B, Sq_new, Hq, D]
#endif
@group(0) @binding(10) var<storage, read_write> lse: array<f32>;      // [B, Sq_new, Hq]
@group(0) @binding(11) var<uniform> params: Params;
