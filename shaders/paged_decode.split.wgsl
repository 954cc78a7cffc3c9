// paged_decode.split (and paged_decode.split_f16, define F16): decode attention over a paged KV cache, split
// across workgroups (flash-decoding): each sequence's keys are cut into num_splits chunks, one
// workgroup each, whose partial softmax states a second pass merges by their log-sum-exp.
//
//   Sequence b holds n = seq_lens[b] tokens in the cache, its Sq_new new ones last; new token i
//   sits at pos = n - Sq_new + i. Query head h reads kv head g = h / (heads_q / heads_kv) and sees
//   key j when j <= pos and (window_left < 0 or j >= pos - window_left):
//     s_j = scale * q . k_j;  s_j = softcap * tanh(s_j / softcap) if softcap > 0;
//     s_j += alibi_slopes[h] * (j - pos)
//     z = sum_j exp(s_j) (+ exp(sinks[h]) with sinks on);  out = sum_j exp(s_j) / z * v_j;  lse = log z
//   A row with nothing visible and no sink (an idle slot, n = 0) gets out = 0 and lse = -inf.
//
// Layout: q, out [B, Sq_new, Hq, D] f32; k_cache, v_cache [num_blocks, block_size, Hkv, D], f32 or
// (F16) f16, key j of sequence b in block block_table[b * max_blocks + j / BS] at slot j % BS
// (BS = block_size); seq_lens [B] i32; alibi_slopes, sinks [Hq] f32 (zero slopes when ALiBi is off:
// they add exactly nothing); lse [B, Sq_new, Hq]. Partial states, row gr = (b * Sq_new + i) * Hq + h:
// part_o [rows, num_splits, D4] (vec4, unnormalised) and part_ml [rows, num_splits] (max, sum).
//
// Pass 1, decode_split: one workgroup per (sequence, kv head, split, row block), kv heads fastest,
// then row blocks (the kv heads of a split run side by side and read its cache blocks whole, and
// the row blocks of a split read the same keys close together in time). A row block is RB of the
// G * Sq_new rows (query head of the group, new token) of one kv head, r = i * G + gh: every K/V
// element of the split is read from the cache once for all of them (a group larger than RB, set
// by the registers one invocation has, is cut into row blocks that each read the split again).
// The cache is read straight into registers, never staged in workgroup memory, in 16-byte loads:
//   - a head row is DC chunks of 8 columns; NL lanes (DC rounded up to a power of two) hold one
//     chunk each of one key's K and V row (a vec4<u32> of 8 halves with PACK8, two vec4<f32>
//     for f32), so the WG invocations are KG = WG / NL key groups, and lane c of every group
//     owns columns 8c..8c+7 of the output of every row of the block;
//   - a tile is BC = KG * KPG keys: group z takes keys z, z + KG, ... of it (the groups of a
//     subgroup load neighbouring keys together), slot z * KPG + i of the tile's workgroup arrays
//     holding key z + i * KG. Each invocation keeps the next tile's KPG chunks of K and of V in
//     flight while it works on this one (2 * KPG loads of 16 bytes, 32 * KPG bytes per
//     invocation; K is fetched once this tile's K is used, V once this tile's V is), each key's
//     block looked up through the block table a tile earlier still;
//   - scores: each lane's partial dot products (its 8 columns of q . k, for the KPG keys and the
//     RB rows) go to workgroup memory; | barrier | one invocation per (key, row) sums the NL
//     partials of its score (odd stride: no bank conflicts), applies softcap, ALiBi and the mask;
//     | barrier |
//   - online softmax per key group: each group keeps its own running max m, sum l and o (its
//     lanes' columns) of every row, over the keys it took, and folds in its KPG scores of the tile:
//     alpha = exp(m_old - m) rescales what came before, p = exp(s - m), o = o * alpha + sum p v.
//     Every lane of a group computes the same (m, l): redundant exps, no barrier, no lane idle.
//   Two barriers a tile. At the end of the split the KG groups' states are merged (max of the
//   maxima, each rescaled, summed through workgroup memory) into the split's slot: (m, l) and o.
// Pass 2, decode_combine: NRG rows per workgroup, each NSL split lanes of NC invocations over its
// vec4 columns, split lane k taking splits k, k + NSL, ...; the lanes merged through workgroup
// memory (a row's splits walked by one invocation each were latency-bound, measurably slower on a
// long sequence of many splits):
//     M = max(max_s m_s, sink);  L = sum_s l_s exp(m_s - M) + exp(sink - M);
//     out = sum_s exp(m_s - M) o_s / L;  lse = M + log L.
// Exponentials are exp2 of differences times log2(e) (flash_fwd.blocked says why), each
// difference clamped at -1000 first so that no infinity is ever formed (exp(-1000) is 0 in f32).
// Every index is guarded in this code, given sizes wgattn.interfaces.paged_decode validated (block-table
// entries a sequence uses in range, u32 element indices): an invalid block reads as zeros, lengths
// are clamped to what the block table addresses, private-array loops stop at their capacity.
// F16: the cache is f16 (half the bytes); arithmetic is f32.
// Reference: wgattn.reference.decode_attention.
#include "interfaces/paged_decode.wgsl"
#include "lib/varlen.wgsl"
#include "lib/softcap.wgsl"

override WG: u32;    // invocations per workgroup
override NL: u32;    // lanes per key: DC rounded up to a power of two, WG % NL == 0
override DC: u32;    // chunks of 8 columns of a head row: ceil(head_dim / 8)
override KG: u32;    // key groups: WG / NL
override KPG: u32;   // keys per group per tile, at most MAX_KPG (what each invocation keeps in flight)
override BC: u32;    // keys per tile: KG * KPG
override RB: u32;    // rows (query head of the group, new token) per workgroup, at most MAX_RB
override QS: u32;    // vec4 stride of a staged q row: 2 * NL (half h of lane c's chunk at h * NL + c)
override PS: u32;    // stride of the partial sums of one (key, row): NL rounded up to odd (no bank conflicts)
override D4: u32;    // vec4 columns of a head row: ceil(head_dim / 4)
override NC: u32;    // column lanes of the combine (a power of two)
override NRG: u32;   // rows per combine workgroup
override NSL: u32;   // split lanes per row of the combine: WG / (NC * NRG)
override CPT: u32;   // vec4 columns per combine invocation: ceil(D4 / NC), at most MAX_CPT
override BS: u32;    // tokens per cache block: a constant, so that j / BS and j % BS compile to
                     // multiplies and shifts instead of a division in every load (one pipeline per
                     // block size, which a model fixes)
// The tile: the manifest's candidates give WG and KPG (best first, per kind of adapter), the other
// knobs follow from them and head_dim, RB from the rows (wgattn.interfaces.paged_decode.tiles).
// KPG sets the bytes each invocation has in flight, which the cache's latency needs; they are
// registers, which set how many workgroups a GPU core holds: at most 256 bytes (2 * KPG chunks of
// 16 bytes for f16, 32 for f32; the manifest's constraint). On the H100 128 invocations with 4 keys
// a group beat every other shape on every benchmark case; on a CPU adapter invocations are SIMD
// lanes and each barrier synchronises them all, so smaller workgroups win there.
const MAX_KPG: u32 = 8u;
// Rows a workgroup holds: every lane keeps the statistics and 8 columns of o of each row, so a
// row costs every lane's registers; on the H100 two blocks of 4 rows beat one of 8, and five
// blocks of 4 one of 16, though each row block re-reads the split (from L2).
const MAX_RB: u32 = 4u;
const MAX_CPT: u32 = 2u;
const NONE: u32 = 0xffffffffu;  // a key with no row in the cache: masked, or its block invalid
const LOWEST: f32 = -3.4028234663852886e38;  // stands for -inf: "no score"
const LOG2E: f32 = 1.4426950408889634;

var<workgroup> q_tile: array<vec4<f32>, RB * QS>;  // the block's q rows, pre-scaled; at the end
                                                   // of the split, the groups' o summed
var<workgroup> part: array<f32, BC * RB * PS>;     // [key][row][lane]: partial dot products
var<workgroup> s_tile: array<f32, BC * RB>;        // [key][row]: the tile's scores
var<workgroup> row_lo: array<u32, RB>;             // each row's first visible key
var<workgroup> row_hi: array<u32, RB>;             // one past its last (0: a row past the block's)
var<workgroup> row_pos: array<i32, RB>;            // its position
var<workgroup> row_slope: array<f32, RB>;          // its ALiBi slope
var<workgroup> m_grp: array<f32, KG * RB>;         // [group][row]: each group's final max
var<workgroup> l_grp: array<f32, KG * RB>;         // [group][row]: and sum
// The combine's: each (row, split lane)'s (max, sum), and its sums of o, [row, lane][chunk][column].
var<workgroup> comb_ml: array<vec2<f32>, NRG * NSL>;
var<workgroup> comb_o: array<vec4<f32>, NRG * NSL * MAX_CPT * NC>;

// 8 columns of a head row in f32.
struct Row8 {
  a: vec4<f32>,
  b: vec4<f32>,
}

// exp(d) for d <= 0, through exp2; d is clamped so that no infinity is formed.
fn exp_le0(d: f32) -> f32 {
  return exp2(max(d, -1000.0) * LOG2E);
}

// Vec4 column c of row `row` of q [*, D] (row = token-major index), zeros past head_dim.
#if VEC4
fn load_q(row: u32, c: u32, dim: u32) -> vec4<f32> {
  return q[row * (dim / 4u) + c];
}
#else
#include "lib/scalar_q.wgsl"
#endif

// Chunk c (columns 8c..8c+7) of cache row `row` (= (block * BS + slot) * Hkv + g) as the cache
// holds it, kept raw in registers while in flight (half the registers of f32 for an f16 cache),
// zeros past head_dim; widen() makes it f32.
#if PACK8
alias Raw = vec4<u32>;
fn load_raw(from_v: bool, row: u32, c: u32, dim: u32) -> Raw {
  if (from_v) {
    return v_cache[row * (dim / 8u) + c];
  }
  return k_cache[row * (dim / 8u) + c];
}
fn widen(x: Raw) -> Row8 {
  return Row8(vec4<f32>(unpack2x16float(x.x), unpack2x16float(x.y)),
              vec4<f32>(unpack2x16float(x.z), unpack2x16float(x.w)));
}
#else
struct Raw {
  a: vec4<T>,
  b: vec4<T>,
}
#if VEC4
fn load_raw(from_v: bool, row: u32, c: u32, dim: u32) -> Raw {
  let d4 = dim / 4u;
  var x: Raw;
  if (from_v) {
    x.a = v_cache[row * d4 + 2u * c];
    if (2u * c + 1u < d4) {
      x.b = v_cache[row * d4 + 2u * c + 1u];
    }
  } else {
    x.a = k_cache[row * d4 + 2u * c];
    if (2u * c + 1u < d4) {
      x.b = k_cache[row * d4 + 2u * c + 1u];
    }
  }
  return x;
}
#else
fn load_raw(from_v: bool, row: u32, c: u32, dim: u32) -> Raw {
  var x: Raw;
  for (var e = 0u; e < 4u; e++) {
    let d = c * 8u + e;
    if (from_v) {
      if (d < dim) {
        x.a[e] = v_cache[row * dim + d];
      }
      if (d + 4u < dim) {
        x.b[e] = v_cache[row * dim + d + 4u];
      }
    } else {
      if (d < dim) {
        x.a[e] = k_cache[row * dim + d];
      }
      if (d + 4u < dim) {
        x.b[e] = k_cache[row * dim + d + 4u];
      }
    }
  }
  return x;
}
#endif
fn widen(x: Raw) -> Row8 {
  return Row8(vec4<f32>(x.a), vec4<f32>(x.b));
}
#endif

// The block-table entries of group z's KPG keys of the tile from t0 of sequence b (key
// t0 + i * KG + z), -1 for keys at or past `end`.
fn key_blocks(t0: u32, end: u32, b: u32, z: u32) -> array<i32, MAX_KPG> {
  var blks: array<i32, MAX_KPG>;
  for (var i = 0u; i < min(KPG, MAX_KPG); i++) {
    blks[i] = -1;
    let j = t0 + i * KG + z;
    if (j < end) {
      blks[i] = block_table[b * params.max_blocks + j / BS];
    }
  }
  return blks;
}

// The cache rows of those keys in kv head g; NONE for -1 and for blocks out of range (refused
// before dispatch; guarded all the same).
fn key_rows(blks: array<i32, MAX_KPG>, t0: u32, g: u32, z: u32) -> array<u32, MAX_KPG> {
  var rows: array<u32, MAX_KPG>;
  for (var i = 0u; i < min(KPG, MAX_KPG); i++) {
    rows[i] = NONE;
    let j = t0 + i * KG + z;
    let blk = blks[i];
    if (blk >= 0 && u32(blk) < params.num_blocks) {
      rows[i] = (u32(blk) * BS + j % BS) * params.heads_kv + g;
    }
  }
  return rows;
}

// This lane's chunk c of the K (or V) rows `rows`: zeros for NONE and for lanes past DC.
fn fetch(from_v: bool, rows: array<u32, MAX_KPG>, c: u32) -> array<Raw, MAX_KPG> {
  var x: array<Raw, MAX_KPG>;
  for (var i = 0u; i < min(KPG, MAX_KPG); i++) {
    if (rows[i] != NONE && c < DC) {
      x[i] = load_raw(from_v, rows[i], c, params.head_dim);
    }
  }
  return x;
}

@compute @workgroup_size(WG)
fn decode_split(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
  // Everything up to the tile loop depends only on the workgroup: returns here are uniform.
  let w = wid.x + wid.y * nwg.x;
  let hkv = params.heads_kv;
  let ns = params.num_splits;
  let nrb = params.row_blocks;
  if (w >= params.batch_size * hkv * ns * nrb) {
    return;  // the spare workgroups of a grid folded into two dimensions
  }
  let g = w % hkv;
  let rb = (w / hkv) % nrb;
  let split = (w / (hkv * nrb)) % ns;
  let b = w / (hkv * nrb * ns);
  let sq = params.new_tokens;
  let hq = params.heads_q;
  let group = hq / hkv;
  let rows = sq * group;
  let row0 = min(rb * RB, rows);
  let nrows = min(RB, rows - row0);
  let dim = params.head_dim;
  // Tokens in the cache, at most what the block table addresses; fewer than Sq_new (an idle
  // slot holds 0) means nothing is visible.
  let n = min(u32(max(seq_lens[b], 0)), params.max_blocks * BS);
  let live = n >= sq && nrows > 0u;
  let wl = params.window_left;
  // Keys any row of the block sees, [lo, hi): the first row's window start to the last row's key.
  var lo = 0u;
  var hi = 0u;
  if (live) {
    let pos_first = n - sq + row0 / group;
    hi = n - sq + (row0 + nrows - 1u) / group + 1u;
    if (wl >= 0) {
      lo = pos_first - min(pos_first, u32(wl));
    }
  }
  // This split's share of [lo, hi): whole tiles, the last split's share shorter (or empty).
  let chunk = ((hi - lo + ns - 1u) / ns + BC - 1u) / BC * BC;
  let start = min(lo + split * chunk, hi);
  let end = min(start + chunk, hi);

  // Stage the block's q rows, pre-scaled (softcap, when on, applies to the scaled score), half
  // h of lane c's chunk (vec4 column 2c + h) at r * QS + h * NL + c.
  for (var e = lid; e < RB * QS; e += WG) {
    let r = e / QS;
    let col = 2u * (e % NL) + (e % QS) / NL;
    var x = vec4<f32>(0.0);
    if (live && r < nrows && col < D4) {
      let rr = row0 + r;
      x = load_q((b * sq + rr / group) * hq + g * group + rr % group, col, dim) * params.scale;
    }
    q_tile[e] = x;
  }
  // Each row's visible keys [row_lo, row_hi) (empty for rows past the block's), position and slope.
  for (var r = lid; r < RB; r += WG) {
    row_lo[r] = 0u;
    row_hi[r] = 0u;
    row_pos[r] = 0;
    row_slope[r] = 0.0;
    if (live && r < nrows) {
      let rr = row0 + r;
      let pos = n - sq + rr / group;
      row_hi[r] = pos + 1u;
      if (wl >= 0) {
        row_lo[r] = pos - min(pos, u32(wl));
      }
      row_pos[r] = i32(pos);
      row_slope[r] = alibi_slopes[g * group + rr % group];
    }
  }

  let lane = lid % NL;
  let z = lid / NL;
  var k_rows = key_rows(key_blocks(start, end, b, z), start, g, z);
  var kn = fetch(false, k_rows, lane);
  var vn = fetch(true, k_rows, lane);
  // The next tile's block-table entries, read a tile before its loads need them: an address that
  // waits on the table stalls its loads (measured on the H100, more so with more rows a block).
  var blk_next = key_blocks(start + BC, end, b, z);
  workgroupBarrier();  // q and the rows' ranges are staged

  let cap = params.softcap;
  var o: array<Row8, MAX_RB>;          // this group's o of each row, this lane's 8 columns
  var m: array<f32, MAX_RB>;           // this group's running max of each row
  var l: array<f32, MAX_RB>;           // and sum of its weights
  for (var r = 0u; r < min(RB, MAX_RB); r++) {
    m[r] = LOWEST;
  }
  // Per tile: partial dots (kn) | barrier | scores | barrier | softmax and P.V (vn). K of the
  // next tile is fetched once kn is used, V once vn is: each load has a tile's work to land.
  for (var t0 = start; t0 < end; t0 += BC) {
    var kw: array<Row8, MAX_KPG>;
    for (var i = 0u; i < min(KPG, MAX_KPG); i++) {
      kw[i] = widen(kn[i]);
    }
    for (var r = 0u; r < min(RB, MAX_RB); r++) {
      let qa = q_tile[r * QS + lane];
      let qb = q_tile[r * QS + NL + lane];
      for (var i = 0u; i < min(KPG, MAX_KPG); i++) {
        part[((z * KPG + i) * RB + r) * PS + lane] = dot(qa, kw[i].a) + dot(qb, kw[i].b);
      }
    }
    k_rows = key_rows(blk_next, t0 + BC, g, z);
    kn = fetch(false, k_rows, lane);
    blk_next = key_blocks(t0 + 2u * BC, end, b, z);
    workgroupBarrier();  // the partial dot products are written

    for (var e = lid; e < BC * RB; e += WG) {
      let r = e % RB;
      let j = t0 + (e / RB) % KPG * KG + e / RB / KPG;  // slot z * KPG + i: key i * KG + z
      var x = 0.0;
      for (var c = 0u; c < DC; c++) {
        x += part[e * PS + c];
      }
      if (cap > 0.0) {
        x = softcap_apply(x, cap);
      }
      x += row_slope[r] * f32(i32(j) - row_pos[r]);
      let seen = j >= row_lo[r] && j < row_hi[r] && j < end;
      s_tile[e] = select(LOWEST, x, seen);
    }
    workgroupBarrier();  // the scores are written; the partial sums are no longer read

    // Group z's keys: rescale each row's state to its new max, then each key's weight and its V.
    for (var r = 0u; r < min(RB, MAX_RB); r++) {
      let m_old = m[r];
      var top = m_old;
      for (var i = 0u; i < min(KPG, MAX_KPG); i++) {
        top = max(top, s_tile[(z * KPG + i) * RB + r]);
      }
      // A row with nothing seen yet keeps top = LOWEST: its weights are 0, and alpha scales zeros.
      let alpha = select(0.0, exp_le0(m_old - top), m_old > LOWEST);
      m[r] = top;
      l[r] *= alpha;
      o[r].a *= alpha;
      o[r].b *= alpha;
    }
    for (var i = 0u; i < min(KPG, MAX_KPG); i++) {
      let vv = widen(vn[i]);
      for (var r = 0u; r < min(RB, MAX_RB); r++) {
        let x = s_tile[(z * KPG + i) * RB + r];
        let p = select(0.0, exp_le0(x - m[r]), x > LOWEST);
        l[r] += p;
        o[r].a += p * vv.a;
        o[r].b += p * vv.b;
      }
    }
    vn = fetch(true, k_rows, lane);  // k_rows: the next tile's, looked up for its K
  }

  // Merge the groups' states: M = max_z m_z, each group's (l, o) scaled by exp(m_z - M) (0 for a
  // group that saw nothing), summed. q_tile, no longer read, holds the running sum of o.
  for (var r = 0u; r < min(RB, MAX_RB); r++) {
    if (lane == 0u) {
      m_grp[z * RB + r] = m[r];
      l_grp[z * RB + r] = l[r];
    }
  }
  workgroupBarrier();  // the groups' (m, l) are written; the last tile's q reads are done
  for (var r = 0u; r < min(RB, MAX_RB); r++) {
    var top = LOWEST;
    for (var zz = 0u; zz < KG; zz++) {
      top = max(top, m_grp[zz * RB + r]);
    }
    let f = select(0.0, exp_le0(m[r] - top), m[r] > LOWEST);
    o[r].a *= f;
    o[r].b *= f;
  }
  for (var zz = 0u; zz < KG; zz++) {
    if (z == zz) {
      for (var r = 0u; r < min(RB, MAX_RB); r++) {
        let keep = select(1.0, 0.0, zz == 0u);  // the first group overwrites q
        q_tile[r * QS + lane] = q_tile[r * QS + lane] * keep + o[r].a;
        q_tile[r * QS + NL + lane] = q_tile[r * QS + NL + lane] * keep + o[r].b;
      }
    }
    workgroupBarrier();  // group zz's o is added
  }

  // This split's partial state of each row (an empty split, or an idle slot: m = LOWEST, l = 0,
  // o = 0).
  for (var e = lid; e < RB * QS; e += WG) {
    let r = e / QS;
    let col = 2u * (e % NL) + (e % QS) / NL;
    if (r < nrows && col < D4) {
      let rr = row0 + r;
      let gr = (b * sq + rr / group) * hq + g * group + rr % group;
      part_o[(gr * ns + split) * D4 + col] = q_tile[e];
    }
  }
  for (var r = lid; r < nrows; r += WG) {
    var top = LOWEST;
    for (var zz = 0u; zz < KG; zz++) {
      top = max(top, m_grp[zz * RB + r]);
    }
    var sum = 0.0;
    for (var zz = 0u; zz < KG; zz++) {
      let mz = m_grp[zz * RB + r];
      sum += select(0.0, l_grp[zz * RB + r] * exp_le0(mz - top), mz > LOWEST);
    }
    let rr = row0 + r;
    let gr = (b * sq + rr / group) * hq + g * group + rr % group;
    part_ml[gr * ns + split] = vec2<f32>(top, sum);
  }
}

@compute @workgroup_size(WG)
fn decode_combine(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
  let w = wid.x + wid.y * nwg.x;
  let cl = lid % NC;
  let sl = (lid / NC) % NSL;
  let gr = w * NRG + lid / (NC * NSL);
  let live = gr < params.batch_size * params.new_tokens * params.heads_q;
  let ns = params.num_splits;
  // Split lane sl's splits (sl, sl + NSL, ...): their (max, sum), merged as they come.
  var mx = LOWEST;
  var sm = 0.0;
  for (var s = sl; live && s < ns; s += NSL) {
    let ml = part_ml[gr * ns + s];
    if (ml.x > LOWEST) {
      let top = max(mx, ml.x);
      sm = sm * exp_le0(mx - top) + ml.y * exp_le0(ml.x - top);
      mx = top;
    }
  }
  let slot = lid / NC;  // (row of the workgroup, split lane)
  if (cl == 0u) {
    comb_ml[slot] = vec2<f32>(mx, sm);
  }
  workgroupBarrier();  // every split lane's (max, sum) is written
  let first = slot - sl;
  var top = LOWEST;
  for (var k = 0u; k < NSL; k++) {
    top = max(top, comb_ml[first + k].x);
  }
  let sinks_on = params.sinks_on != 0u;
  var sink = 0.0;
  if (sinks_on && live) {
    sink = sinks[gr % params.heads_q];
    top = max(top, sink);
  }
  var z = 0.0;
  for (var k = 0u; k < NSL; k++) {
    let ml = comb_ml[first + k];
    z += select(0.0, ml.y * exp_le0(ml.x - top), ml.x > LOWEST);
  }
  if (sinks_on) {
    z += exp_le0(sink - top);
  }
  // This lane's columns over its splits, each split's o scaled to the row's max.
  for (var i = 0u; i < min(CPT, MAX_CPT); i++) {
    let col = cl + NC * i;
    var acc = vec4<f32>(0.0);
    for (var s = sl; live && col < D4 && s < ns; s += NSL) {
      let ml = part_ml[gr * ns + s];
      if (ml.x > LOWEST) {
        acc += exp_le0(ml.x - top) * part_o[(gr * ns + s) * D4 + col];
      }
    }
    comb_o[slot * NC * MAX_CPT + i * NC + cl] = acc;
  }
  workgroupBarrier();  // every split lane's columns are written
  if (!live || sl != 0u) {
    return;  // no barrier follows
  }
  // Nothing seen and no sink: out 0, lse -inf. Otherwise z >= 1 (the term at the max is 1).
  let seen = z > 0.0;
  let inv = select(0.0, 1.0 / z, seen);
  for (var i = 0u; i < min(CPT, MAX_CPT); i++) {
    let col = cl + NC * i;
    if (col < D4) {
      var acc = vec4<f32>(0.0);
      for (var k = 0u; k < NSL; k++) {
        acc += comb_o[(slot + k) * NC * MAX_CPT + i * NC + cl];
      }
      let x = acc * inv;
#if VEC4
      out[gr * D4 + col] = x;
#else
      for (var e = 0u; e < 4u; e++) {
        let d = col * 4u + e;
        if (d < params.head_dim) {
          out[gr * params.head_dim + d] = x[e];
        }
      }
#endif
    }
  }
  if (cl == 0u) {
    lse[gr] = select(neg_inf(), top + log(z), seen);
  }
}
