// gemm.smx: C = A · B on subgroup matrices, f16 x f16 -> f32: the benchmark of the path every
// smx kernel takes to the tensor cores (Dawn lowers subgroup matrices to SPIR-V
// KHR_cooperative_matrix at subgroup scope), written the way NVIDIA's own sample of that path is
// (vk_cooperative_matrix_perf, shaders/shmem.comp), so that the two compare knob by knob.
// Not an attention kernel: no registry entry; wgattn.gemm plans it (its knobs: wgattn.gemm.Tile).
//
//   C[m, n] = sum_k A[m, k] * B[k, n]
// Layout: A [ROWS, DEPTH] row-major f16; B [DEPTH, COLS] row-major f16; C [ROWS, COLS] row-major
// f32. ROWS % BM = COLS % BN = DEPTH % (KT * STAGES) = 0 (the plan checks).
// Grid: (COLS / BN, ROWS / BM) workgroups of WG = SGR * SGC * SG invocations, SG the subgroup size
// the plan was made for (subgroup s: invocations s*SG .. s*SG+SG-1, as every Vulkan driver lays a
// 1-D workgroup out). Workgroup (x, y) owns the BM x BN block of C at (y*BM, x*BN); subgroup s owns
// TM x TN result fragments of it, from fragment row sr = s / SGC * TM and column sc = s % SGC * TN,
// held in registers over the whole depth.
//
// A step of KT along the depth (the sample's): the next step's blocks are loaded from storage into
// registers (16-byte loads, APT of A and BPT of B per invocation) before this step's products, so
// their latency hides behind the products, and stored to workgroup memory at the next step; each
// subgroup loads its TM left fragments once and each right fragment once, and multiplies every
// pair. STAGES = 2: two copies of the staging, one barrier a step instead of two (the step loop
// is written out twice, so the staging index stays a constant).
//
// Staging: one inner array per fragment (M x K of A, K x N of B), rows padded to an odd number of
// 16 bytes (the 8 rows one matrix load reads at once fall in different banks); a matrix load takes
// a pointer to one inner array, offset 0 and a constant stride, so Dawn's robustness has no
// offset or stride to check (it would make the stride a runtime value: NVIDIA's sample with that
// check added runs at a sixth of its speed). SPLIT: the fragments indexed [subgroup row or
// column][fragment], the one runtime index (the subgroup's) clamped once for the whole kernel and
// every other index a constant expression, which robustness leaves alone; else [fragment] with the
// subgroup's part added, one clamp a load.
// UNROLL: the products written out (wgsl.py's #for): no loop for a driver to unroll or not, no
// register array (acc_i_j); else loops over fragments with arrays indexed by their counters (the
// driver unrolls them, or puts the arrays in local memory). Storage loads and stores are written out
// either way. ROWS, COLS and DEPTH are pipeline constants (the sample's specialization constants):
// the step loop's bound is a constant, so robustness adds no loop guard.
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
// SGR x SGC subgroups of SG invocations, TM x TN result fragments each, KT deep a step (KF
// fragments), STAGES copies of the staging; APT, BPT: 16-byte loads of A and of B per invocation
// a step (whole: the plan checks).
#const SGR
#const SGC
#const TM
#const TN
#const KT
#const KF
#const SG
#const STAGES
#const APT
#const BPT

alias LF = subgroup_matrix_left<f16, SK, SM>;    // A: M rows x K
alias RF = subgroup_matrix_right<f16, SN, SK>;   // B: K x N columns
alias AF = subgroup_matrix_result<f32, SN, SM>;  // C: M rows x N columns

const WG: u32 = SGR * SGC * SG;  // invocations per workgroup
const BM: u32 = SGR * TM * SM;   // rows of C per workgroup
const BN: u32 = SGC * TN * SN;   // columns of C per workgroup
const NF: u32 = BN / SN;         // fragments along the block's columns
const AW: u32 = KT / 8u;         // 16-byte loads along a row of the A block
const BW: u32 = BN / 8u;         // ... of the B block
// Rows of a fragment in vec4<u32> (8 halves): K halves (A) or N halves (B), padded by 8 halves
// where the row is 16 halves (32 bytes -> 48), left as is at 8 (16 bytes: 8 rows fill 8 banks).
const RSA: u32 = (SK + SK / 16u * 8u) / 8u;
const RSB: u32 = (SN + SN / 16u * 8u) / 8u;

override ROWS: u32;   // M
override COLS: u32;   // N
override DEPTH: u32;  // K
override STEPS: u32 = DEPTH / KT;  // steps along the depth: a constant once the pipeline is made

@group(0) @binding(0) var<storage, read> a: array<vec4<u32>>;        // A [ROWS, DEPTH / 8]
@group(0) @binding(1) var<storage, read> b: array<vec4<u32>>;        // B [DEPTH, COLS / 8]
@group(0) @binding(2) var<storage, read_write> c: array<f32>;        // C [ROWS, COLS]

alias AFrag = array<vec4<u32>, SM * RSA>;
alias BFrag = array<vec4<u32>, SK * RSB>;
#if SPLIT
var<workgroup> ta: array<array<array<AFrag, TM * KF>, SGR>, STAGES>;  // [stage][sr][i * KF + kk]
var<workgroup> tb: array<array<array<BFrag, KF * TN>, SGC>, STAGES>;  // [stage][sc][kk * TN + j]
#else
var<workgroup> ta: array<array<AFrag, SGR * TM * KF>, STAGES>;  // [stage][(sr * TM + i) * KF + kk]
var<workgroup> tb: array<array<BFrag, KF * NF>, STAGES>;        // [stage][kk * NF + sc * TN + j]
#endif

// Element e of a step's A block (row e / AW, halves e % AW * 8 ..) into staging st.
fn put_a(st: u32, e: u32, v: vec4<u32>) {
  let r = e / AW;
  let h = e % AW * 8u;
  let at = r % SM * RSA + h % SK / 8u;
#if SPLIT
  ta[st][r / SM / TM][r / SM % TM * KF + h / SK][at] = v;
#else
  ta[st][r / SM * KF + h / SK][at] = v;
#endif
}

// Element e of a step's B block (row k = e / BW, columns e % BW * 8 ..) into staging st.
fn put_b(st: u32, e: u32, v: vec4<u32>) {
  let k = e / BW;
  let n = e % BW * 8u;
  let at = k % SK * RSB + n % SN / 8u;
#if SPLIT
  tb[st][n / SN / TN][k / SK * TN + n / SN % TN][at] = v;
#else
  tb[st][k / SK * NF + n / SN][at] = v;
#endif
}

@compute @workgroup_size(WG)
fn gemm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let sg = lid / SG;
  let sr = sg / SGC;
  let sc = sg % SGC;
  let row0 = wid.y * BM;
  let col0 = wid.x * BN;
  // This invocation's loads, the same each step but for the depth: A's rows and column, B's.
  let a0 = (row0 + lid / AW) * (DEPTH / 8u) + lid % AW;
  let b0 = (lid / BW) * (COLS / 8u) + col0 / 8u + lid % BW;
#for f APT
  var ra{f} = a[a0 + {f} * (WG / AW) * (DEPTH / 8u)];
#endfor
#for f BPT
  var rb{f} = b[b0 + {f} * (WG / BW) * (COLS / 8u)];
#endfor
#if UNROLL
#for i TM
#for j TN
  var acc_{i}_{j}: AF;  // zeros
#endfor
#endfor
#else
  var acc: array<AF, TM * TN>;  // zeros
#endif
#if STAGES2
#for f APT
  put_a(0u, lid + {f} * WG, ra{f});
#endfor
#for f BPT
  put_b(0u, lid + {f} * WG, rb{f});
#endfor
  workgroupBarrier();
#endif

  for (var s = 0u; s < STEPS; s += STAGES) {
#for st STAGES
    {
      let more = s + {st}u + 1u < STEPS;
      let k1 = (s + {st}u + 1u) * KT;  // the next step's depth
#if STAGES2
      if (more) {
#for f APT
        ra{f} = a[a0 + {f} * (WG / AW) * (DEPTH / 8u) + k1 / 8u];
#endfor
#for f BPT
        rb{f} = b[b0 + ({f} * (WG / BW) + k1) * (COLS / 8u)];
#endfor
      }
#else
      workgroupBarrier();  // everyone is done reading the staging
#for f APT
      put_a(0u, lid + {f} * WG, ra{f});
#endfor
#for f BPT
      put_b(0u, lid + {f} * WG, rb{f});
#endfor
      workgroupBarrier();
      if (more) {
#for f APT
        ra{f} = a[a0 + {f} * (WG / AW) * (DEPTH / 8u) + k1 / 8u];
#endfor
#for f BPT
        rb{f} = b[b0 + ({f} * (WG / BW) + k1) * (COLS / 8u)];
#endfor
      }
#endif
      // This subgroup's products of staging {st}.
#if UNROLL
#for kk KF
      {
#for i TM
#if SPLIT
        let l{i} = subgroupMatrixLoad<LF, row_major>(&ta[{st}][sr][{i} * KF + {kk}], 0u, RSA);
#else
        let l{i} = subgroupMatrixLoad<LF, row_major>(&ta[{st}][(sr * TM + {i}) * KF + {kk}], 0u, RSA);
#endif
#endfor
#for j TN
#if SPLIT
        let r{j} = subgroupMatrixLoad<RF, row_major>(&tb[{st}][sc][{kk} * TN + {j}], 0u, RSB);
#else
        let r{j} = subgroupMatrixLoad<RF, row_major>(&tb[{st}][{kk} * NF + sc * TN + {j}], 0u, RSB);
#endif
#for i TM
        acc_{i}_{j} = subgroupMatrixMultiplyAccumulate(l{i}, r{j}, acc_{i}_{j});
#endfor
#endfor
      }
#endfor
#else
      for (var kk = 0u; kk < KF; kk++) {
        var lf: array<LF, TM>;
        for (var i = 0u; i < TM; i++) {
#if SPLIT
          lf[i] = subgroupMatrixLoad<LF, row_major>(&ta[{st}][sr][i * KF + kk], 0u, RSA);
#else
          lf[i] = subgroupMatrixLoad<LF, row_major>(&ta[{st}][(sr * TM + i) * KF + kk], 0u, RSA);
#endif
        }
        for (var j = 0u; j < TN; j++) {
#if SPLIT
          let rf = subgroupMatrixLoad<RF, row_major>(&tb[{st}][sc][kk * TN + j], 0u, RSB);
#else
          let rf = subgroupMatrixLoad<RF, row_major>(&tb[{st}][kk * NF + sc * TN + j], 0u, RSB);
#endif
          for (var i = 0u; i < TM; i++) {
            acc[i * TN + j] = subgroupMatrixMultiplyAccumulate(lf[i], rf, acc[i * TN + j]);
          }
        }
      }
#endif
#if STAGES2
      if (more) {
#for f APT
        put_a(1u - {st}u, lid + {f} * WG, ra{f});
#endfor
#for f BPT
        put_b(1u - {st}u, lid + {f} * WG, rb{f});
#endfor
      }
      workgroupBarrier();
#endif
    }
#endfor
  }

  let c0 = (row0 + sr * TM * SM) * COLS + col0 + sc * TN * SN;  // this subgroup's first fragment
#if UNROLL
#for i TM
#for j TN
  subgroupMatrixStore<row_major>(&c, c0 + {i} * SM * COLS + {j} * SN, acc_{i}_{j}, COLS);
#endfor
#endfor
#else
  for (var i = 0u; i < TM; i++) {
    for (var j = 0u; j < TN; j++) {
      subgroupMatrixStore<row_major>(&c, c0 + i * SM * COLS + j * SN, acc[i * TN + j], COLS);
    }
  }
#endif
}
