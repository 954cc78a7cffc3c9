// stream: the copy a decode kernel's bandwidth is compared with, and the read alone beside it (a
// decode step only reads its cache: the read is its ceiling). Not an attention kernel: no registry
// entry; wgattn.bandwidth.stream_plan plans it.
//   WRITE: dst[i] = src[i] for every vec4 i of src. Else src is only read: dst[0] is written only if
//   the xor of an invocation's loads is a value a zeroed buffer never gives, so that no load is dead.
// Layout: src, dst: arrays of vec4<u32> (16 bytes each), dst as long as src (one vec4 for the read).
// Grid: ceil(vec4s / (256 * PER)) workgroups of 256 invocations, folded into (x, y) past 65535;
// workgroup w moves vec4s w * 256 * PER + lid + 256 * k, k < PER: the invocations of a workgroup
// load neighbouring vec4s together (coalesced), each PER of them in flight.

override PER: u32 = 8u;        // vec4s per invocation
override WRITE: bool = true;   // copy src to dst (else read src only)

@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;         // the bytes moved
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<u32>>;   // the copy (the read: one vec4)

@compute @workgroup_size(256)
fn stream(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
  let n = arrayLength(&src);
  let base = (wid.x + wid.y * nwg.x) * 256u * PER + lid;
  var acc = vec4<u32>(0u);
  for (var k = 0u; k < PER; k++) {
    let i = base + k * 256u;
    if (i < n) {
      let x = src[i];
      if (WRITE) {
        dst[i] = x;
      }
      acc ^= x;
    }
  }
  if (!WRITE && all(acc == vec4<u32>(0x9e3779b9u))) {
    dst[0] = acc;
  }
}
