// The fragment shapes of the attention kernels on subgroup matrices (flash_fwd.smx, smx_wide,
// paged_prefill.smx) and the strides of their fragment arrays in workgroup memory. The adapter's
// subgroupMatrixConfigs decide M x N x K (the plan picks one and sets the defines SMX_M16 /
// SMX_N16 / SMX_K16: 16 when set, else 8; WGSL wants the dimensions as constants).
#if SMX_M16
const SM: u32 = 16u;  // M: query rows of a fragment
#else
const SM: u32 = 8u;
#endif
#if SMX_N16
const SN: u32 = 16u;  // N: keys of an S fragment, head-dim columns of an O fragment
#else
const SN: u32 = 8u;
#endif
#if SMX_K16
const SK: u32 = 16u;  // K: head-dim chunk of Q·Kᵀ, key chunk of P·V
#else
const SK: u32 = 8u;
#endif
const PADH: u32 = 8u;               // f16 row padding of a fragment: rows start 16 bytes apart mod 128
const KP4: u32 = (SK + PADH) / 4u;  // vec4 stride of a fragment row of K halves (Q, Kᵀ, P)
const NP4: u32 = (SN + PADH) / 4u;  // vec4 stride of a fragment row of N halves (V)
const SP4: u32 = (SN + 4u) / 4u;    // vec4 stride of a fragment row of N floats (S, O)
// The softmax's TPR lanes of a row take its vec4 columns in turn (lane u: 4u, 4u + 4 TPR, ..),
// not a run each: a row's lanes then read S and write P at neighbouring addresses, and at D = 64
// on the H100 (TPR = 2) a half-warp's 8-byte writes of P (rows of 48 bytes) meet no bank twice
// (a run each put row 0's second lane on the banks of row 3's first: rows 48 bytes apart). In one
// series in Chromium: flash_fwd.smx 84.1 -> 86.3 TFLOP/s at (4,16,2048,64), 112 -> 114 at
// (2,16,4096,128) (causal). S's reads: lib/bank_rows.wgsl.
#include "lib/frag_pad.wgsl"
