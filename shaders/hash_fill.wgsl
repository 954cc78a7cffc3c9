// hash_fill: a buffer filled with a hash of each element's index, so that a decode benchmark's
// GB-sized K/V cache is made on the GPU (it never crosses HTTP nor Pyodide's memory) while the host
// knows any part of it bit for bit (wgattn.bandwidth.fill_values, the reference it must match).
// Not an attention kernel: no registry entry; wgattn.bandwidth.fill_plans plans it.
//   value(e) = ((lowbias32(e ^ SEED) >> 24) - 128) / 64: a multiple of 1/64 in [-2, 2), exact in
//   f16 and in f32, so the host's copy has no rounding to agree on.
// Layout: cache: array<u32>; word i holds elements 2i and 2i + 1 as f16 (HALF), else element i as f32.
// Grid: ceil(words / 256) workgroups of 256 invocations, one word each, folded into (x, y) past 65535.

override SEED: u32 = 0u;     // which tensor: K and V get different values
override HALF: bool = true;  // the cache holds f16 pairs (else one f32 per word)

@group(0) @binding(0) var<storage, read_write> cache: array<u32>;  // the tensor filled

fn value(e: u32) -> f32 {
  var x = e ^ SEED;  // lowbias32 (Chris Wellons' integer hash)
  x = x ^ (x >> 16u);
  x = x * 0x7feb352du;
  x = x ^ (x >> 15u);
  x = x * 0x846ca68bu;
  x = x ^ (x >> 16u);
  return f32(i32(x >> 24u) - 128) / 64.0;
}

@compute @workgroup_size(256)
fn fill(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = (wid.x + wid.y * nwg.x) * 256u + lid;
  if (i >= arrayLength(&cache)) {
    return;
  }
  if (HALF) {
    cache[i] = pack2x16float(vec2<f32>(value(2u * i), value(2u * i + 1u)));
  } else {
    cache[i] = bitcast<u32>(value(i));
  }
}
