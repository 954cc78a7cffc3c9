// Workgroup tree reductions over `scratch`, which the including shader declares: an array of WG
// values of any type that max and + take (f32, or vec4<f32> for four rows at once). Any WG works,
// a power of two or not.

// The smallest power of two >= WG: the tree reductions halve it.
fn wg_pow2() -> u32 {
  return 1u << (32u - countLeadingZeros(WG - 1u));
}

// scratch[0] = (lane-wise) max over scratch[0 .. WG). Called in uniform control flow by every
// invocation; the caller has put its value in scratch[lid] and passed a barrier.
fn reduce_max(lid: u32) {
  for (var s: u32 = wg_pow2() >> 1u; s > 0u; s = s >> 1u) {
    if (lid < s && lid + s < WG) {
      scratch[lid] = max(scratch[lid], scratch[lid + s]);
    }
    workgroupBarrier();
  }
}

// scratch[0] = (lane-wise) sum over scratch[0 .. WG); same contract as reduce_max.
fn reduce_sum(lid: u32) {
  for (var s: u32 = wg_pow2() >> 1u; s > 0u; s = s >> 1u) {
    if (lid < s && lid + s < WG) {
      scratch[lid] = scratch[lid] + scratch[lid + s];
    }
    workgroupBarrier();
  }
}
