// The `sdpa_arena` interface, the original sdpa_arena kernel's: q, k, v, an optional padding mask
// and out in one f32 arena at element offsets, addressed through (batch, head, seq) strides; 144
// bytes of params.
// Every sdpa_arena kernel (a user's too) declares its Params struct and bindings by #including
// this file; wgattn.registry reads the fields and bindings from here, wgattn.interfaces.sdpa_arena
// fills them.

struct Params {
  batch: u32,          // B
  heads: u32,          // H (query and key/value heads alike: the interface has no GQA)
  seq_q: u32,          // Sq
  seq_k: u32,          // Sk
  head_dim: u32,       // D
  q_off: u32,          // element offset of q in the arena
  k_off: u32,          // ... of k
  v_off: u32,          // ... of v
  out_off: u32,        // ... of out
  mask_off: u32,       // ... of the padding mask (mask_kind 2)
  mask_kind: u32,      // 0 none, 1 causal, 2 padding, 3 sliding window
  scale: f32,          // score scale (the original passed it as the f32's bits in a u32: same bytes)
  window: u32,         // mask_kind 3: keys i - window .. i are visible
  mask_sq_stride: u32, // mask strides in elements; 0 broadcasts that axis
  mask_sk_stride: u32,
  mask_b_stride: u32,
  mask_h_stride: u32,
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
  q_b: u32,            // q strides (batch, head, seq); head_dim is contiguous
  q_h: u32,
  q_s: u32,
  _q_pad: u32,
  k_b: u32,            // k strides
  k_h: u32,
  k_s: u32,
  _k_pad: u32,
  v_b: u32,            // v strides
  v_h: u32,
  v_s: u32,
  _v_pad: u32,
  o_b: u32,            // out strides
  o_h: u32,
  o_s: u32,
  _o_pad: u32,
}

@group(0) @binding(0) var<storage, read_write> arena: array<f32>;  // q, k, v, mask and out
@group(0) @binding(1) var<uniform> p: Params;
