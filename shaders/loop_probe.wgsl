// loop_probe: counts to `goal` in one invocation. Debian 12's Mesa 22 lavapipe ends every loop
// of an invocation after 65535 iterations and carries on with wrong values; a runtime that gets
// anything but `goal` back must not be trusted with long rows (docs/runtimes.md).
// Grid: one workgroup of one invocation. Not an attention kernel: no registry entry.

struct Probe {
  goal: u32,     // how far to count: > 65535, passed at run time so it cannot be folded away
  _pad0: u32,
  _pad1: u32,
  _pad2: u32,
}

@group(0) @binding(0) var<storage, read_write> counted: array<u32>;  // [0]: iterations run
@group(0) @binding(1) var<uniform> probe: Probe;

@compute @workgroup_size(1)
fn main() {
  var n: u32 = 0u;
  for (var i: u32 = 0u; i < probe.goal; i++) {
    n += 1u;
  }
  counted[0] = n;
}
