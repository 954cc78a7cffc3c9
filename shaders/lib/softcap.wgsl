// softcap_apply(x, cap) = cap * tanh(x / cap): the score cap of Gemma-2 / FlashAttention.
// (Interim form with the tanh built-in; issue 11 replaces it with one that does not trust the
// driver's tanh near 0.)
fn softcap_apply(x: f32, cap: f32) -> f32 {
  return cap * tanh(clamp(x / cap, -10.0, 10.0));
}
