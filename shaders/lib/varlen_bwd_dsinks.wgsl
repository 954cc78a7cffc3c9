// The varlen_bwd interface's last pass, bwd_dsinks, shared by every kernel of the interface (its
// header includes this file): the gradient of sum(out * dout) with respect to each query head's
// sink logit,
//
//   dsinks[h] = -sum_i exp(sinks[h] - lse_i) * delta_i   over the rows i of head h, all sequences
//
// exp(sinks[h] - lse_i) is the sink's share of row i's softmax (lse holds the sink's term); a row
// whose lse is not finite contributes nothing. It needs only stats (lse, the delta the kernel's
// first pass wrote, the sinks), so no kernel's tiling changes it. With sinks_on == 0 it writes
// nothing: dsinks stays the zeros it was created with.
//
// Grid: one workgroup of 64 invocations per query head (the count folded into x and y past
// 65535). Each invocation sums the rows lid, lid + 64, ... in blocks of DSINKS_BLOCK terms (a
// partial sum, then the total: the float32 error of a blocked sum, not of one long sequential
// sum), then a tree reduction in workgroup memory: deterministic, no atomics. Every index is
// guarded here (kernels of the interface may be compiled as trusted).

const DSINKS_BLOCK: u32 = 32u;  // rows an invocation sums into a partial sum before the total
var<workgroup> dsinks_part: array<f32, 64>;

@compute @workgroup_size(64)
fn bwd_dsinks(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
  let hq = params.heads_q;
  let h = wid.x + wid.y * nwg.x;  // depends on the workgroup only: the return is uniform
  if (params.sinks_on == 0u || h >= hq) {
    return;
  }
  let rows = params.total_q * hq;
  let sink = stats[2u * rows + hq + h];
  var total = 0.0;
  for (var t0 = lid; t0 < params.total_q; t0 += 64u * DSINKS_BLOCK) {
    var part = 0.0;
    for (var b = 0u; b < DSINKS_BLOCK; b++) {
      let t = t0 + 64u * b;
      if (t >= params.total_q) {
        break;
      }
      let lse = stats[t * hq + h];
      // tested on the bits: WGSL may assume no value is infinite
      if ((bitcast<u32>(lse) & 0x7f800000u) != 0x7f800000u) {
        part += exp2((sink - lse) * 1.4426950408889634) * stats[rows + t * hq + h];
      }
    }
    total += part;
  }
  dsinks_part[lid] = total;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s = s >> 1u) {
    if (lid < s) {
      dsinks_part[lid] = dsinks_part[lid] + dsinks_part[lid + s];
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    dsinks[h] = -dsinks_part[0];
  }
}
