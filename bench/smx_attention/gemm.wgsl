// The ceiling for flash_fwd.smx: C = A · Bᵀ, f16 x f16 -> f32, on subgroup matrices, written the
// same way (tiles staged in workgroup memory as arrays of padded fragments, every matrix load at
// offset 0 with a constant stride, so Dawn's robustness adds no predicate to it).
//   A [rows, depth] and B [cols, depth] row-major f16 (as vec4); C [rows, cols] f32.
// FLAT (a contrast): the same memory layout in one flat array per operand, each load at a
// dynamic offset into it, which Dawn's robustness must predicate (the usual way to write it).
// Grid: one workgroup per (BM x BN) block of C, BM = SGR * TM * M, BN = SGC * TN * N; subgroup s
// owns the TM x TN fragments at (s / SGC, s % SGC). depth % KC == 0, rows % BM == 0, cols % BN == 0.
enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium.subgroup_matrix_uniformity);

#if SMX_M16
const SM: u32 = 16u;
#else
const SM: u32 = 8u;
#endif
#if SMX_N16
const SN: u32 = 16u;
#else
const SN: u32 = 8u;
#endif
#if SMX_K16
const SK: u32 = 16u;
#else
const SK: u32 = 8u;
#endif
const KP4: u32 = (SK + 8u) / 4u;  // vec4 stride of a padded fragment row
const TM: u32 = 64u / SM;         // fragments a subgroup owns: 64 x 64 of C
const TN: u32 = 64u / SN;
const KC: u32 = 32u;              // depth staged per step
const KF: u32 = KC / SK;          // fragments along the staged depth

alias LF = subgroup_matrix_left<f16, SK, SM>;
alias RF = subgroup_matrix_right<f16, SN, SK>;
alias AF = subgroup_matrix_result<f32, SN, SM>;

override SGR: u32 = 2u;  // subgroups along rows
override SGC: u32 = 2u;  // subgroups along columns
override WG: u32;        // SGR * SGC * the subgroup size
override BM: u32 = SGR * TM * SM;
override BN: u32 = SGC * TN * SN;

@group(0) @binding(0) var<storage, read> a: array<vec4<f16>>;   // [rows, depth / 4]
@group(0) @binding(1) var<storage, read> b: array<vec4<f16>>;   // [cols, depth / 4]
@group(0) @binding(2) var<storage, read_write> c: array<f32>;   // [rows, cols]
@group(0) @binding(3) var<uniform> dims: vec4<u32>;             // rows, cols, depth

const FA: u32 = SM * KP4;  // vec4 of one A fragment
const FB: u32 = SN * KP4;
#if FLAT
var<workgroup> ta: array<vec4<f16>, SGR * TM * KF * FA>;
var<workgroup> tb: array<vec4<f16>, SGC * TN * KF * FB>;
#else
var<workgroup> ta: array<array<vec4<f16>, FA>, SGR * TM * KF>;
var<workgroup> tb: array<array<vec4<f16>, FB>, SGC * TN * KF>;
#endif

@compute @workgroup_size(WG)
fn gemm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_size) sg_size: u32) {
  let sg = lid / sg_size;
  let sr = sg / SGC;
  let sc = sg % SGC;
  let row0 = wid.y * BM;
  let col0 = wid.x * BN;
  let d4 = dims.z / 4u;
  var acc: array<AF, TM * TN>;
  for (var i = 0u; i < TM * TN; i++) {
    acc[i] = AF();
  }
  for (var k0 = 0u; k0 < dims.z; k0 += KC) {
    for (var f = 0u; f < (BM * KC / 4u + WG - 1u) / WG; f++) {  // constant trip counts: no loop guard
      let e = lid + WG * f;
      if (e >= BM * KC / 4u) {
        break;
      }
      let r = e / (KC / 4u);
      let col = (e % (KC / 4u)) * 4u;
#if FLAT
      ta[((r / SM) * KF + col / SK) * FA + (r % SM) * KP4 + (col % SK) / 4u] = a[(row0 + r) * d4 + (k0 + col) / 4u];
#else
      ta[(r / SM) * KF + col / SK][(r % SM) * KP4 + (col % SK) / 4u] = a[(row0 + r) * d4 + (k0 + col) / 4u];
#endif
    }
    for (var f = 0u; f < (BN * KC / 4u + WG - 1u) / WG; f++) {
      let e = lid + WG * f;
      if (e >= BN * KC / 4u) {
        break;
      }
      let r = e / (KC / 4u);
      let col = (e % (KC / 4u)) * 4u;
#if FLAT
      tb[((r / SN) * KF + col / SK) * FB + (r % SN) * KP4 + (col % SK) / 4u] = b[(col0 + r) * d4 + (k0 + col) / 4u];
#else
      tb[(r / SN) * KF + col / SK][(r % SN) * KP4 + (col % SK) / 4u] = b[(col0 + r) * d4 + (k0 + col) / 4u];
#endif
    }
    workgroupBarrier();
    if (sg < SGR * SGC) {
      for (var kk = 0u; kk < KF; kk++) {
        var lf: array<LF, TM>;
        for (var i = 0u; i < TM; i++) {
#if FLAT
          lf[i] = subgroupMatrixLoad<LF, row_major>(&ta, ((sr * TM + i) * KF + kk) * FA, KP4);
#else
          lf[i] = subgroupMatrixLoad<LF, row_major>(&ta[(sr * TM + i) * KF + kk], 0u, KP4);
#endif
        }
        for (var j = 0u; j < TN; j++) {
#if FLAT
          let rf = subgroupMatrixLoad<RF, col_major>(&tb, ((sc * TN + j) * KF + kk) * FB, KP4);
#else
          let rf = subgroupMatrixLoad<RF, col_major>(&tb[(sc * TN + j) * KF + kk], 0u, KP4);
#endif
          for (var i = 0u; i < TM; i++) {
            acc[i * TN + j] = subgroupMatrixMultiplyAccumulate(lf[i], rf, acc[i * TN + j]);
          }
        }
      }
    }
    workgroupBarrier();
  }
  if (sg < SGR * SGC) {
    for (var i = 0u; i < TM; i++) {
      for (var j = 0u; j < TN; j++) {
        let at = (row0 + (sr * TM + i) * SM) * dims.y + col0 + (sc * TN + j) * SN;
        subgroupMatrixStore<row_major>(&c, at, acc[i * TN + j], dims.y);
      }
    }
  }
}
