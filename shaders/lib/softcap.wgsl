// cap * tanh(x / cap) and its slope without the tanh built-in: WGSL and Vulkan let tanh inherit
// exp's error as an ABSOLUTE error, and lavapipe's is 1e-7 near 0 (thousands of ulps), so
// 30 * tanh(s / 30) moved small scores by 3e-6 (docs/runtimes.md). Here |y| < 0.55
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
