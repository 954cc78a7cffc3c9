// precision_probe: evaluates, element by element, every floating-point built-in the kernels use
// (and the kernels' own softcap) on arguments the host chose; the host compares each result with
// float64 and reports the worst error in ulps and absolute (wgattn.precision, docs/runtimes.md).
// WGSL lets tanh, exp and log differ by many ulps between drivers: this measures them per adapter.
//   got[f * n + i] = F_f(args[3 (f * n + i)], args[3 (f * n + i) + 1], args[3 (f * n + i) + 2])
// Grid: (ceil(n / 64), functions, 1): workgroup row y is the function. Not an attention kernel:
// no registry entry; wgattn.precision.FUNCTIONS lists the functions in this order (a test checks).

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

fn evaluate(f: u32, a: f32, b: f32, c: f32) -> f32 {
  switch f {
    case 0u: { return exp(a); }                          // exp
    case 1u: { return exp2(a); }                         // exp2
    case 2u: { return log(a); }                          // log
    case 3u: { return log2(a); }                         // log2
    case 4u: { return tanh(a); }                         // tanh
    case 5u: { return a / b; }                           // division
    case 6u: { return inverseSqrt(a); }                  // inverseSqrt
    case 7u: { return sqrt(a); }                         // sqrt
    case 8u: { return fma(a, b, c); }                    // fma
    case 9u: { return b * tanh(a / b); }                 // softcap_builtin_tanh
    case 10u: { return softcap_apply(a, b); }            // softcap_apply
    case 11u: { return softcap_slope(a, b); }            // softcap_slope
    default: { return 0.0; }
  }
}

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
