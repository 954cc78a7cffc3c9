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
#include "lib/frag_pad.wgsl"
