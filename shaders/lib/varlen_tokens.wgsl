// For the packed kernels that walk tokens (an invocation or a block per query or per key token):
// which sequence a token is in, and which queries see a key. The including shader declares
// cu_seqlens_q, cu_seqlens_k (its interface's header) and params.batch_size.

// A finite lse, tested on the bits: WGSL may assume that no value is infinite, so a comparison
// with -inf (or +inf, FlashAttention's empty row) could be folded away.
fn is_finite_bits(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
}

// The sequence owning a token: the last b in [0, batch_size) with cu[b] <= t. Empty sequences
// repeat a prefix sum, and the last of equal entries is the one whose range holds t.
fn seq_of_q(t: i32) -> u32 {
  var lo: u32 = 0u;
  var hi: u32 = params.batch_size;  // invariant: cu[lo] <= t < cu[hi]
  while (hi - lo > 1u) {
    let mid = (lo + hi) / 2u;
    if (cu_seqlens_q[mid] <= t) { lo = mid; } else { hi = mid; }
  }
  return lo;
}

fn seq_of_k(t: i32) -> u32 {
  var lo: u32 = 0u;
  var hi: u32 = params.batch_size;
  while (hi - lo > 1u) {
    let mid = (lo + hi) / 2u;
    if (cu_seqlens_k[mid] <= t) { lo = mid; } else { hi = mid; }
  }
  return lo;
}

// Query rows [lo, hi) that see some key of [key_first, key_last]: lib/varlen.wgsl's visible_keys read
// the other way, i >= j - offset - window_right (window_right >= 0), i <= j - offset + window_left
// (window_left >= 0).
fn visible_queries(key_first: i32, key_last: i32, offset: i32, len_q: i32,
                   window_left: i32, window_right: i32) -> vec2<i32> {
  var lo = 0;
  var hi = len_q;
  if (window_right >= 0) {
    lo = max(lo, key_first - offset - window_right);
  }
  if (window_left >= 0) {
    hi = min(hi, key_last - offset + window_left + 1);
  }
  return vec2<i32>(lo, hi);
}
