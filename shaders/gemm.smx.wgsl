// gemm.smx: C = A · B on subgroup matrices, f16 x f16 -> f32: the benchmark of the path every
// smx kernel takes to the tensor cores (Dawn lowers subgroup matrices to SPIR-V
// KHR_cooperative_matrix at subgroup scope), written the way NVIDIA's own sample of that path is
// (vk_cooperative_matrix_perf, shaders/shmem.comp), so that the two compare knob by knob.
// Not an attention kernel: no registry entry; wgattn.gemm plans it (its knobs: wgattn.gemm.Config).
//
//   C[m, n] = sum_k A[m, k] * B[k, n]
// Layout: A [ROWS, DEPTH] row-major f16; B [DEPTH, COLS] row-major f16, or with BT its transpose
// [COLS, DEPTH] row-major; C [ROWS, COLS] row-major f32. ROWS % BM = COLS % BN = DEPTH % KT = 0.
// Grid: (COLS / BN, ROWS / BM) workgroups of WG = SGR * SGC * SG invocations, SG the subgroup size
// the plan was made for (subgroup s: invocations s*SG .. s*SG+SG-1, as every Vulkan driver lays a
// 1-D workgroup out). Workgroup (x, y) owns the BM x BN block of C at (y*BM, x*BN); subgroup s owns
// TM x TN result fragments of it, from fragment row s / SGC * TM and column s % SGC * TN, held in
// registers over the whole depth.
//
// A step of KT along the depth: the workgroup copies the A block (BM x KT) and the B block
// (KT x BN) from storage to workgroup memory; each subgroup then loads its TM left fragments once
// and each of its right fragments once, and multiplies every pair (TM * TN products a fragment).
//   PREFETCH: the next step's blocks are loaded from storage into registers before this step's
//     products and stored to workgroup memory at the next step (the sample's way: the loads'
//     latency hides behind the products);
//   STAGES = 2: two copies of the staging, one barrier a step instead of two.
// Load widths: LOAD16, storage loads of 16 bytes (vec4<u32>, the sample's) else 8 (vec4<f16>);
// STAGE16, workgroup elements of 16 bytes else 8; SPLIT (LOAD16 without STAGE16) stores a load as
// two elements. Matrix offsets and strides count elements of the array they read.
// Staging layout:
//   FRAG: one inner array per fragment (M x K of A; K x N of B, or N x K of Bᵀ), rows padded to an
//     odd number of 16 bytes (the 8 rows one matrix load reads at once fall in different banks);
//     a matrix load takes a pointer to one inner array, offset 0 and a constant stride, so Dawn's
//     robustness proves it in bounds and leaves it alone;
//   else the block's rows one after another, padded by 8 halves (the sample's layout): a matrix
//     load at a computed offset, whose bounds robustness must check.
// SIZES_UNIFORM: ROWS, COLS, DEPTH come from the uniform, else from the overrides (the sample bakes
// them in as specialization constants: the step loop's bound is then a constant).
// Reference: wgattn.gemm.reference (float64) on the inputs shaders/hash_fill.wgsl makes.
#include "lib/subgroup_matrix.wgsl"

#if SMX_M16
const SM: u32 = 16u;  // M: rows of a left and of a result fragment
#else
const SM: u32 = 8u;
#endif
#if SMX_N16
const SN: u32 = 16u;  // N: columns of a right and of a result fragment
#else
const SN: u32 = 8u;
#endif
#if SMX_K16
const SK: u32 = 16u;  // K: the depth of one fragment product
#else
const SK: u32 = 8u;
#endif
// SGR x SGC subgroups of SG invocations, TM x TN result fragments each, KT depth a step (a
// multiple of SK and of 8).
#const SGR
#const SGC
#const TM
#const TN
#const KT
#const SG
#if STAGES2
const STAGES: u32 = 2u;  // copies of the staging
#else
const STAGES: u32 = 1u;
#endif

#if LOAD16
alias LT = vec4<u32>;  // one storage load: 8 halves
const LH: u32 = 8u;
#else
alias LT = vec4<f16>;  // 4 halves
const LH: u32 = 4u;
#endif
#if STAGE16
alias ST = vec4<u32>;  // one workgroup element: 8 halves
const SH: u32 = 8u;
#else
alias ST = vec4<f16>;  // 4 halves
const SH: u32 = 4u;
#endif

alias LF = subgroup_matrix_left<f16, SK, SM>;    // A: M rows x K
alias RF = subgroup_matrix_right<f16, SN, SK>;   // B: K x N columns
alias AF = subgroup_matrix_result<f32, SN, SM>;  // C: M rows x N columns

const WG: u32 = SGR * SGC * SG;  // invocations per workgroup
const BM: u32 = SGR * TM * SM;   // rows of C per workgroup
const BN: u32 = SGC * TN * SN;   // columns of C per workgroup
const KF: u32 = KT / SK;         // fragments along a step's depth
const NF: u32 = BN / SN;         // fragments along the block's columns
const ALOADS: u32 = BM * KT / LH;        // storage loads of an A block
const BLOADS: u32 = BN * KT / LH;        // ... of a B block
const APT: u32 = (ALOADS + WG - 1u) / WG;  // ... per invocation
const BPT: u32 = (BLOADS + WG - 1u) / WG;
// Rows of K halves (A, Bᵀ) and of N halves (B): padded to an odd number of 16 bytes.
const PK: u32 = SK / 16u * 8u;
const PN: u32 = SN / 16u * 8u;
const RSA: u32 = (SK + PK) / SH;  // elements a fragment row of A (and of Bᵀ) takes
#if BT
const RSB: u32 = (SK + PK) / SH;
#else
const RSB: u32 = (SN + PN) / SH;
#endif
const RWA: u32 = (KT + 8u) / SH;  // elements a block row takes (FRAG = 0)
#if BT
const RWB: u32 = (KT + 8u) / SH;
#else
const RWB: u32 = (BN + 8u) / SH;
#endif

override ROWS: u32;   // M (SIZES_UNIFORM: unused)
override COLS: u32;   // N
override DEPTH: u32;  // K
override STEPS: u32 = DEPTH / KT;  // steps along the depth

@group(0) @binding(0) var<storage, read> a: array<LT>;        // A [ROWS, DEPTH / LH]
@group(0) @binding(1) var<storage, read> b: array<LT>;        // B [DEPTH, COLS / LH], Bᵀ [COLS, DEPTH / LH]
@group(0) @binding(2) var<storage, read_write> c: array<f32>;  // C [ROWS, COLS]
@group(0) @binding(3) var<uniform> dims: vec4<u32>;           // ROWS, COLS, DEPTH, 0

#if FRAG
alias ABlock = array<array<ST, SM * RSA>, BM / SM * KF>;  // [row fragment * KF + k fragment]
#if BT
alias BBlock = array<array<ST, SN * RSB>, NF * KF>;       // [column fragment * KF + k fragment]
#else
alias BBlock = array<array<ST, SK * RSB>, KF * NF>;       // [k fragment * NF + column fragment]
#endif
#else
alias ABlock = array<ST, BM * RWA>;
#if BT
alias BBlock = array<ST, BN * RWB>;
#else
alias BBlock = array<ST, KT * RWB>;
#endif
#endif
var<workgroup> ta: array<ABlock, STAGES>;
var<workgroup> tb: array<BBlock, STAGES>;

fn sizes() -> vec3<u32> {
#if SIZES_UNIFORM
  return dims.xyz;
#else
  return vec3<u32>(ROWS, COLS, DEPTH);
#endif
}

// Element v of the A block at row r, halves h .. h+SH-1.
fn put_a(st: u32, r: u32, h: u32, v: ST) {
#if FRAG
  ta[st][r / SM * KF + h / SK][r % SM * RSA + h % SK / SH] = v;
#else
  ta[st][r * RWA + h / SH] = v;
#endif
}

// Element v of the B block at (k, n .. n+SH-1), or of the Bᵀ block at (n, k .. k+SH-1).
fn put_b(st: u32, r: u32, h: u32, v: ST) {
#if FRAG
#if BT
  tb[st][r / SN * KF + h / SK][r % SN * RSB + h % SK / SH] = v;
#else
  tb[st][r / SK * NF + h / SN][r % SK * RSB + h % SN / SH] = v;
#endif
#else
  tb[st][r * RWB + h / SH] = v;
#endif
}

// The blocks of step k0 from storage into registers.
fn fetch(ra: ptr<function, array<LT, APT>>, rb: ptr<function, array<LT, BPT>>, lid: u32, row0: u32, col0: u32,
         k0: u32, size: vec3<u32>) {
  for (var f = 0u; f < APT; f++) {
    let e = lid + f * WG;
    if (ALOADS % WG == 0u || e < ALOADS) {
      let r = e / (KT / LH);
      (*ra)[f] = a[(row0 + r) * (size.z / LH) + k0 / LH + e % (KT / LH)];
    }
  }
  for (var f = 0u; f < BPT; f++) {
    let e = lid + f * WG;
    if (BLOADS % WG == 0u || e < BLOADS) {
#if BT
      let r = e / (KT / LH);
      (*rb)[f] = b[(col0 + r) * (size.z / LH) + k0 / LH + e % (KT / LH)];
#else
      let r = e / (BN / LH);
      (*rb)[f] = b[(k0 + r) * (size.y / LH) + col0 / LH + e % (BN / LH)];
#endif
    }
  }
}

// The registers' blocks into staging st.
fn put(ra: ptr<function, array<LT, APT>>, rb: ptr<function, array<LT, BPT>>, lid: u32, st: u32) {
  for (var f = 0u; f < APT; f++) {
    let e = lid + f * WG;
    if (ALOADS % WG == 0u || e < ALOADS) {
      let r = e / (KT / LH);
      let h = e % (KT / LH) * LH;
#if SPLIT
      put_a(st, r, h, bitcast<vec4<f16>>((*ra)[f].xy));
      put_a(st, r, h + 4u, bitcast<vec4<f16>>((*ra)[f].zw));
#else
      put_a(st, r, h, (*ra)[f]);
#endif
    }
  }
  for (var f = 0u; f < BPT; f++) {
    let e = lid + f * WG;
    if (BLOADS % WG == 0u || e < BLOADS) {
#if BT
      let r = e / (KT / LH);
      let h = e % (KT / LH) * LH;
#else
      let r = e / (BN / LH);
      let h = e % (BN / LH) * LH;
#endif
#if SPLIT
      put_b(st, r, h, bitcast<vec4<f16>>((*rb)[f].xy));
      put_b(st, r, h + 4u, bitcast<vec4<f16>>((*rb)[f].zw));
#else
      put_b(st, r, h, (*rb)[f]);
#endif
    }
  }
}

// This subgroup's products of staging st into its accumulators.
fn products(acc: ptr<function, array<AF, TM * TN>>, st: u32, sr: u32, sc: u32) {
  for (var kk = 0u; kk < KF; kk++) {
    var lf: array<LF, TM>;
    for (var i = 0u; i < TM; i++) {
#if FRAG
      lf[i] = subgroupMatrixLoad<LF, row_major>(&ta[st][(sr * TM + i) * KF + kk], 0u, RSA);
#else
      lf[i] = subgroupMatrixLoad<LF, row_major>(&ta[st], (sr * TM + i) * SM * RWA + kk * SK / SH, RWA);
#endif
    }
    for (var j = 0u; j < TN; j++) {
#if FRAG
#if BT
      let rf = subgroupMatrixLoad<RF, col_major>(&tb[st][(sc * TN + j) * KF + kk], 0u, RSB);
#else
      let rf = subgroupMatrixLoad<RF, row_major>(&tb[st][kk * NF + sc * TN + j], 0u, RSB);
#endif
#else
#if BT
      let rf = subgroupMatrixLoad<RF, col_major>(&tb[st], (sc * TN + j) * SN * RWB + kk * SK / SH, RWB);
#else
      let rf = subgroupMatrixLoad<RF, row_major>(&tb[st], kk * SK * RWB + (sc * TN + j) * SN / SH, RWB);
#endif
#endif
      for (var i = 0u; i < TM; i++) {
        (*acc)[i * TN + j] = subgroupMatrixMultiplyAccumulate(lf[i], rf, (*acc)[i * TN + j]);
      }
    }
  }
}

@compute @workgroup_size(WG)
fn gemm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let size = sizes();
  let sg = lid / SG;
  let sr = sg / SGC;
  let sc = sg % SGC;
  let row0 = wid.y * BM;
  let col0 = wid.x * BN;
  var acc: array<AF, TM * TN>;  // zeros
  var ra: array<LT, APT>;
  var rb: array<LT, BPT>;
#if STAGES2
  fetch(&ra, &rb, lid, row0, col0, 0u, size);
  put(&ra, &rb, lid, 0u);
  workgroupBarrier();
#else
#if PREFETCH
  fetch(&ra, &rb, lid, row0, col0, 0u, size);
#endif
#endif
#if SIZES_UNIFORM
  let steps = size.z / KT;
  for (var s = 0u; s < steps; s++) {
#else
  let steps = STEPS;
  for (var s = 0u; s < STEPS; s++) {  // a constant bound: robustness adds no loop guard
#endif
    let more = s + 1u < steps;
#if STAGES2
#if PREFETCH
    if (more) {
      fetch(&ra, &rb, lid, row0, col0, (s + 1u) * KT, size);
    }
    products(&acc, s % 2u, sr, sc);
    if (more) {
      put(&ra, &rb, lid, (s + 1u) % 2u);
    }
#else
    if (more) {
      fetch(&ra, &rb, lid, row0, col0, (s + 1u) * KT, size);
      put(&ra, &rb, lid, (s + 1u) % 2u);
    }
    products(&acc, s % 2u, sr, sc);
#endif
    workgroupBarrier();
#else
    workgroupBarrier();  // everyone is done reading the staging
#if PREFETCH
    put(&ra, &rb, lid, 0u);
    workgroupBarrier();
    if (more) {
      fetch(&ra, &rb, lid, row0, col0, (s + 1u) * KT, size);
    }
#else
    fetch(&ra, &rb, lid, row0, col0, s * KT, size);
    put(&ra, &rb, lid, 0u);
    workgroupBarrier();
#endif
    products(&acc, 0u, sr, sc);
#endif
  }
  for (var i = 0u; i < TM; i++) {
    for (var j = 0u; j < TN; j++) {
      let at = (row0 + (sr * TM + i) * SM) * size.y + col0 + (sc * TN + j) * SN;
      subgroupMatrixStore<row_major>(&c, at, acc[i * TN + j], size.y);
    }
  }
}
