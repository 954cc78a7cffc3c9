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

// ---- softcap (shaders/lib/softcap.wgsl, pasted verbatim; tests/test_softcap_lib.py checks) ----
// cap * tanh(x / cap) and its slope without the tanh built-in: WGSL and Vulkan let tanh inherit
// exp's error as an ABSOLUTE error, and lavapipe's is 1e-7 near 0 (thousands of ulps), so
// 30 * tanh(s / 30) moved small scores by 3e-6 (docs/runtimes.md, issue 11). Here |y| < 0.55
// takes an odd polynomial (relative error 1e-9 before f32 rounding: the first term is y itself)
// and |y| >= 0.55 takes (1 - e) / (1 + e) with e = exp(-2|y|) <= 0.33, where no cancellation
// amplifies exp2's error. Both stay finite for every finite input (e underflows to 0: t = 1).
const SOFTCAP_POLY_EDGE: f32 = 0.55;

// tanh(y) with a relative error of a few ulps over all of f32.
fn softcap_tanh(y: f32) -> f32 {
  let a = abs(y);
  if (a < SOFTCAP_POLY_EDGE) {
    // tanh(y) = y + y^3 P(y^2), P fitted (weighted least squares) on [0, 0.55].
    let z = y * y;
    let p = -0.33333316445350647 + z * (0.13332585990428925 + z * (-0.05385235697031021
            + z * (0.02107190527021885 + z * -0.006274590268731117)));
    return y + (y * z) * p;
  }
  let e = exp2(-2.8853900817779268 * a);  // exp(-2|y|): -2 * log2(e) * |y|
  return sign(y) * ((1.0 - e) / (1.0 + e));
}

// 1 - tanh(y)^2 with a relative error of a few ulps: 4e / (1 + e)^2 where |tanh| nears 1 (the
// form 1 - t * t would lose every digit there).
fn softcap_sech2(y: f32) -> f32 {
  let a = abs(y);
  if (a < SOFTCAP_POLY_EDGE) {
    let t = softcap_tanh(y);
    return 1.0 - t * t;  // >= 0.75: no cancellation
  }
  let e = exp2(-2.8853900817779268 * a);
  let d = 1.0 + e;
  return 4.0 * e / (d * d);
}

// The soft-capped score: cap * tanh(x / cap) (cap > 0), relatively accurate near 0.
fn softcap_apply(x: f32, cap: f32) -> f32 {
  return cap * softcap_tanh(x / cap);
}

// d softcap_apply / dx = 1 - tanh(x / cap)^2 = 1 - (s / cap)^2, from the UNcapped score x.
fn softcap_slope(x: f32, cap: f32) -> f32 {
  return softcap_sech2(x / cap);
}
// ---- end softcap ----

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
