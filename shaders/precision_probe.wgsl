// precision_probe: evaluates, element by element, every floating-point built-in the kernels use
// (and the kernels' own softcap) on arguments the host chose; the host compares each result with
// float64 and reports the worst error in ulps and absolute (wgattn.precision, docs/runtimes.md).
// WGSL lets tanh, exp and log differ by many ulps between drivers: this measures them per adapter.
//   got[f * n + i] = F_f(args[3 (f * n + i)], args[3 (f * n + i) + 1], args[3 (f * n + i) + 2])
// Grid: (ceil(n / 64), functions, 1): workgroup row y is the function. Not an attention kernel:
// no registry entry; wgattn.precision.FUNCTIONS lists the functions, and the host appends the
// switch that evaluates them.

struct Probe {
  n: u32,      // samples per function
  count: u32,  // functions (rows of the grid)
  _pad0: u32,
  _pad1: u32,
}

@group(0) @binding(0) var<storage, read> args: array<f32>;        // [count, n, 3] arguments
@group(0) @binding(1) var<storage, read_write> got: array<f32>;   // [count, n] results
@group(0) @binding(2) var<uniform> probe: Probe;

#include "lib/softcap.wgsl"

// fn evaluate(f: u32, a: f32, b: f32, c: f32) -> f32, F_f: written by wgattn.precision from its
// FUNCTIONS list (case f returns FUNCTIONS[f].expr), so the list and the switch cannot differ.

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = wid.x * 64u + lid;
  let f = wid.y;
  if (i >= probe.n || f >= probe.count) {
    return;
  }
  let at = f * probe.n + i;
  got[at] = evaluate(f, args[3u * at], args[3u * at + 1u], args[3u * at + 2u]);
}
