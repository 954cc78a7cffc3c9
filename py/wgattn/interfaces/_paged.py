"""What the interfaces over a paged KV cache (paged_decode, paged_prefill) share: both compute
wgattn.reference.decode_attention (new tokens per sequence against the cache), so they share its
one check of the arguments, the drawing of a paged cache (the grids, the live runs, the
benchmarks), the live configuration's fields, the buffers every kernel of either binds, the
pictures, and the check of an output on inputs the GPU filled (wgattn.bandwidth).

    q:        [B, Sq_new, Hq, D] float32        k_cache, v_cache: [num_blocks, block_size, Hkv, D]
    block_table: int32 [B, max_blocks]          seq_lens: int32 [B] (the new tokens included)
    alibi_slopes, sinks: [Hq] float32, optional
    outputs:  out [B, Sq_new, Hq, D], lse [B, Sq_new, Hq] (natural log, the sink included)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .. import ranges, tolerance
from .. import reference as _reference
from ..bandwidth import device_filled, fill_values, is_device_filled
from ..plan import Buffer, Output
from ..registry import Kernel
from ..target import DEFAULT
from .base import MAX_ELEMENTS, Case, FilledCheck, Interface, Layout, data_buffer, out_buffer
from .config import LiveConfig, knob

if TYPE_CHECKING:  # numpy.typing is newer than the page's numpy 1.17: for annotations only
    from numpy.typing import DTypeLike

__all__ = [
    "PagedInterface",
    "INPUTS",
    "OPTIONAL",
    "MAX_SEQ_LEN",
    "MAX_HEAD_DIM",
    "checked",
    "cache_dtype",
    "paged_cache",
    "PagedConfig",
    "head_params",
    "buffers",
    "outputs",
    "spans",
    "magnitudes",
    "f32_bounds",
    "visible_keys",
    "check_filled",
    "probabilities",
    "head_view",
]

INPUTS = ("q", "k_cache", "v_cache", "block_table", "seq_lens")
OPTIONAL = ("alibi_slopes", "sinks")
MAX_SEQ_LEN = 1 << 20  # tokens a sequence of a paged case may hold (a million: a long context)
MAX_HEAD_DIM = 512  # Gemma's global layers; a kernel's plan says where an adapter cannot hold it
_U32 = 2**32 - 1


def checked(case: Case, interface: str) -> _reference.DecodeArgs:
    """The case's arguments through the reference's one check."""
    i, o = case.inputs, case.options
    missing = [n for n in INPUTS if i.get(n) is None]
    if missing:
        raise ValueError(f"{missing[0]} is missing from the case's inputs; {interface} takes {list(INPUTS + OPTIONAL)}")
    return _reference.check_decode_args(
        *(i[n] for n in INPUTS),
        scale=o.get("scale"),
        window_left=o.get("window_left", -1),
        softcap=o.get("softcap", 0.0),
        alibi_slopes=i.get("alibi_slopes"),
        sinks=i.get("sinks"),
    )


def cache_dtype(kernel: Kernel) -> "DTypeLike":
    """The cache as `kernel` reads it: float16 for an F16 variant, else float32."""
    return np.float16 if kernel.defines.get("F16") else np.float32


def paged_cache(
    rs: np.random.RandomState,
    lens: Sequence[int],
    new_tokens: int,
    hq: int,
    hkv: int,
    d: int,
    block_size: int,
    filled: bool = False,
    fill_q: bool = False,
):
    """Random float32 q and a paged cache for sequences of `lens` tokens (the inputs of the grids,
    the live runs and the benchmarks): each sequence's blocks scattered over the cache in a
    shuffled order, one spare block, unused block-table entries -1; with `filled`, a cache left
    for the GPU to fill (wgattn.bandwidth.device_filled: no bytes), and with `fill_q` q too (a
    prefill's q is as large as a cache). (q, k_cache, v_cache, block_table, seq_lens)."""
    need = [-(-int(n) // block_size) for n in lens]
    num_blocks = sum(need) + 1
    order = rs.permutation(num_blocks)
    table = np.full((len(lens), max(need + [1]) + 1), -1, dtype=np.int32)
    at = 0
    for b, k in enumerate(need):
        table[b, :k] = order[at : at + k]
        at += k
    q_shape = (len(lens), new_tokens, hq, d)
    q = device_filled(q_shape) if fill_q else rs.standard_normal(q_shape).astype(np.float32)
    shape = (num_blocks, block_size, hkv, d)
    if filled:
        k_cache, v_cache = device_filled(shape), device_filled(shape)
    else:
        k_cache = rs.standard_normal(shape).astype(np.float32)
        v_cache = rs.standard_normal(shape).astype(np.float32)
    return q, k_cache, v_cache, table, np.array(lens, dtype=np.int32)


@dataclass
class PagedConfig(LiveConfig):
    """A batch of sequences in a paged cache, the one description of a paged case (its bounds
    stated here; each interface bounds `new_tokens` its own way): `batch` sequences of up to
    `seq_len` tokens in a paged cache of `block_size`-token blocks, `new_tokens` new ones each
    (the first sequence holds seq_len; with `ragged`, the others a random length, idle slots (0)
    included). A live check draws it on the host (`tensors`, within MAX_ELEMENTS), a benchmark
    with its large inputs left for the GPU to fill (`tensors(filled=True)`)."""

    batch: int = knob(4, 1, 64)
    new_tokens: int = knob(1, 1, MAX_SEQ_LEN)
    heads: int = knob(8, 1, 128)
    heads_kv: int = knob(2, 0, 128, sentinels={0: "as many as heads"}, hint="key/value heads (GQA)", divides="heads")
    seq_len: int = knob(1000, 1, MAX_SEQ_LEN, hint="tokens in the cache of the first sequence, the new ones included")
    head_dim: int = knob(64, 1, MAX_HEAD_DIM)
    block_size: int = knob(16, 1, 256, hint="tokens per cache block")
    window_left: int = knob(-1, -1, MAX_SEQ_LEN, sentinels={-1: "unbounded"}, hint="keys pos - left .. pos visible")
    softcap: float = knob(0.0, f32="softcap", sentinels={0: "off"}, hint="scores become softcap * tanh(s / softcap)")
    alibi: bool = knob(False, hint="ALiBi's geometric slopes per query head")
    sinks: bool = knob(False, hint="a logit per query head in the softmax's denominator (gpt-oss)")
    ragged: bool = knob(True, hint="sequences of other lengths after the first, idle slots included")
    seed: int = knob(0, 0, 2**32 - 1)

    # Whether a benchmark leaves q for the GPU to fill too (a prefill's q is as large as a cache).
    FILL_Q = False

    @property
    def kv_heads(self) -> int:
        return self.heads_kv or self.heads

    def check(self) -> None:
        if self.seq_len < self.new_tokens:
            raise ValueError(f"seq_len ({self.seq_len}) must hold the {self.new_tokens} new tokens")

    def lengths(self, rs: np.random.RandomState) -> List[int]:
        if not self.ragged:
            return [self.seq_len] * self.batch
        rest = [int(n) if n >= self.new_tokens else 0 for n in rs.randint(0, self.seq_len + 1, self.batch - 1)]
        return [self.seq_len] + rest

    def tensors(self, filled: bool = False) -> Dict[str, np.ndarray]:
        """q, the paged cache, block_table, seq_lens, and the ALiBi slopes and sinks asked for,
        drawn from the seed. The cache is drawn on the host within MAX_ELEMENTS, or (`filled`)
        left for the GPU to fill, of any size (wgattn.bandwidth.device_filled)."""
        cache = 2 * (self.batch * self.seq_len + self.block_size) * self.kv_heads * self.head_dim
        if not filled and cache > MAX_ELEMENTS:
            raise ValueError(
                f"the cache (2 * batch * seq_len * heads_kv * head_dim = {cache}) must stay within {MAX_ELEMENTS} elements"
            )
        rs = np.random.RandomState(self.seed)
        lens = self.lengths(rs)
        q, k, v, table, seq_lens = paged_cache(
            rs,
            lens,
            self.new_tokens,
            self.heads,
            self.kv_heads,
            self.head_dim,
            self.block_size,
            filled=filled,
            fill_q=filled and self.FILL_Q,
        )
        out = {"q": q, "k_cache": k, "v_cache": v, "block_table": table, "seq_lens": seq_lens}
        if self.alibi:
            out["alibi_slopes"] = (2.0 ** -np.linspace(1, 8, self.heads)).astype(np.float32)
        if self.sinks:
            out["sinks"] = (rs.standard_normal(self.heads) * 2).astype(np.float32)
        return out


def head_params(a: _reference.DecodeArgs) -> Tuple[np.ndarray, np.ndarray]:
    """The ALiBi slopes and the sinks as float32 [Hq], zeros where off (a zero slope adds
    exactly nothing; the Params' sinks_on says whether the sinks count)."""
    zeros = np.zeros(a.q.shape[2], dtype=np.float32)
    slopes = zeros if a.alibi_slopes is None else a.alibi_slopes.astype(np.float32)
    return slopes, zeros if a.sinks is None else a.sinks.astype(np.float32)


def buffers(kernel: Kernel, a: _reference.DecodeArgs, heads: Mapping[str, np.ndarray]) -> Dict[str, Buffer]:
    """The buffers of a paged kernel's inputs: q (float32), the cache as `kernel` reads it
    (cache_dtype), the block table and lengths (int32), and `heads`, the interface's buffers of
    per-head parameters (`head_params`). An input the GPU fills gets its size and no bytes (its
    buffer starts zeroed)."""
    data: Dict[str, np.ndarray] = {
        "block_table": a.block_table.astype(np.int32),
        "seq_lens": np.array(a.seq_lens, dtype=np.int32),
        **heads,
    }
    out = {name: data_buffer(name, arr) for name, arr in data.items()}
    for name, dtype in (("q", np.float32), ("k_cache", cache_dtype(kernel)), ("v_cache", cache_dtype(kernel))):
        given = getattr(a, name)
        if is_device_filled(given):  # the GPU fills it: the size only, the buffer starts zeroed
            out[name] = Buffer(name, given.size * np.dtype(dtype).itemsize, "storage")
        else:
            out[name] = data_buffer(name, np.ascontiguousarray(given, dtype=dtype))
    return out


def outputs(a: _reference.DecodeArgs) -> Tuple[Dict[str, Buffer], List[Output]]:
    """out [B, Sq_new, Hq, D] and lse [B, Sq_new, Hq], float32: their buffers and read-backs."""
    bsz, sq, hq, d = a.q.shape
    rows = bsz * sq * hq
    bufs = {"out": out_buffer("out", 4 * rows * d), "lse": out_buffer("lse", 4 * rows)}
    return bufs, [Output("out", "out", 0, (bsz, sq, hq, d)), Output("lse", "lse", 0, (bsz, sq, hq))]


def check_indices(a: _reference.DecodeArgs, interface: str, extra: Optional[Mapping[str, int]] = None) -> None:
    """Every element index a paged kernel forms fits in u32, every position in i32: a ValueError
    naming what is too large."""
    bsz, sq, hq, d = a.q.shape
    num_blocks, block_size, hkv, _ = a.k_cache.shape
    max_blocks = a.block_table.shape[1]
    sizes = {
        "q (B * Sq_new * Hq * D)": bsz * sq * hq * d,
        "the cache (num_blocks * block_size * Hkv * D)": num_blocks * block_size * hkv * d,
        "block_table (B * max_blocks)": bsz * max_blocks,
        **(extra or {}),
    }
    for what, size in sizes.items():
        if size > _U32:
            raise ValueError(f"{what} = {size} is too large for {interface}: element indices must fit in u32")
    if max_blocks * block_size > 2**31 - 1:
        raise ValueError(f"max_blocks * block_size = {max_blocks * block_size} must fit in i32 (token positions)")


def spans(seq_lens: Sequence[int], window_left: int, new_tokens: int) -> List[int]:
    """Per sequence, how many keys its new tokens see together (its window from the first one)."""
    out = []
    for n in seq_lens:
        n = int(n)
        lo = 0 if (n == 0 or window_left < 0) else max(0, n - new_tokens - window_left)
        out.append(n - lo)
    return out


def _used(a: _reference.DecodeArgs, name: str) -> np.ndarray:
    """The blocks of cache `name` that some sequence uses (the rest is never read), or the whole
    cache when the GPU fills it."""
    cache = getattr(a, name)
    if is_device_filled(cache):
        return cache
    bs = cache.shape[1]
    used = [a.block_table[b, : -(-n // bs)] for b, n in enumerate(a.seq_lens) if n]
    return cache[np.unique(np.concatenate(used))] if used else cache[:0]


def magnitudes(a: _reference.DecodeArgs) -> Dict[str, float]:
    """What a paged kernel's manifest "half" names (wgattn.ranges.half): q's largest magnitude, the
    used blocks' of each cache, |scale|."""
    return {"q": ranges.amax(a.q), "k_cache": ranges.amax(_used(a, "k_cache")),
            "v_cache": ranges.amax(_used(a, "v_cache")), "scale": abs(a.scale)}  # fmt: skip


def f32_bounds(a: _reference.DecodeArgs) -> List[ranges.Bound]:
    """What every paged kernel computes in float32 (wgattn.ranges): the scores (ALiBi's bias over
    the longest span included), and out's running sum over the keys a row sees."""
    span = max(spans(a.seq_lens, a.window_left, a.q.shape[1]) + [0])
    slope = float(np.max(np.abs(a.alibi_slopes))) if a.alibi_slopes is not None and a.alibi_slopes.size else 0.0
    k, v = _used(a, "k_cache"), _used(a, "v_cache")
    return [ranges.scores(a.scale, a.q, k, slope, max(span - 1, 0)), ranges.sums(v, span, "v_cache")]


def visible_keys(seq_lens: Sequence[int], window_left: int, new_tokens: int) -> int:
    """(query row, visible key) pairs per query head over the batch: what attention must compute
    at least (a benchmark's FLOPs: 4 * D * Hq times this)."""
    total = 0
    for n in (int(x) for x in seq_lens):
        if n == 0:
            continue
        pos = np.arange(n - new_tokens, n, dtype=np.int64)
        lo = np.zeros_like(pos) if window_left < 0 else np.maximum(pos - window_left, 0)
        total += int((pos + 1 - lo).sum())
    return total


def _values(a: np.ndarray, name: str, index: np.ndarray) -> np.ndarray:
    """Elements `index` of input `name`: what the GPU filled (wgattn.bandwidth.fill_values), or
    the host's array."""
    if is_device_filled(a):
        return fill_values(name, index)
    return np.asarray(a).reshape(-1)[index].astype(np.float64)


# Every (sequence, kv head) of a case on filled inputs is checked while B * Hkv * S * D is at most
# this; past it, the first and the last (each costs S * D regenerated values per tensor, and a
# reference run).
CHECK_ELEMENTS = 1 << 22


def check_filled(
    case: Case,
    got: Mapping[str, np.ndarray],
    a: _reference.DecodeArgs,
    rows: int = 0,
    naive: Optional[Callable[..., Tuple[np.ndarray, np.ndarray]]] = None,
) -> FilledCheck:
    """`out` of a case whose inputs the GPU filled (wgattn.bandwidth.fill_values) against the
    float64 reference by the tolerance rule (the naive run on the same values: `naive`, with
    decode_attention's arguments, or the naive float32 run), on the (sequence, kv head) pairs
    CHECK_ELEMENTS allows; with `rows`, on the first and the last `rows` new tokens of each (a
    prefill's reference over all of them would take minutes in the page): the rows i0 .. i1 - 1
    of a sequence of n tokens are exactly the new tokens of the sequence cut after its token
    n - Sq_new + i1 (what follows is invisible to them), so the one reference judges them as
    they are."""
    bsz, sq, hq, d = a.q.shape
    _, bs, hkv, _ = a.k_cache.shape
    g_size = hq // hkv
    if bsz * hkv * max(a.seq_lens) * d <= CHECK_ELEMENTS:
        pairs = [(b, g) for b in range(bsz) for g in range(hkv)]
    else:
        pairs = sorted({(0, 0), (bsz - 1, hkv - 1)})
    spans = [(0, sq)] if not rows or 2 * rows >= sq else [(0, rows), (sq - rows, sq)]
    out = np.asarray(got["out"])
    want, naive_runs, seen = [], [], []
    for b, g in pairs:
        n = a.seq_lens[b]
        heads = np.arange(g * g_size, (g + 1) * g_size)
        # kv head g of the sequence's blocks, once (each span reads a prefix of them)
        blocks = a.block_table[b, : max(1, -(-n // bs))] if n else np.zeros(1, np.int64)  # an idle slot reads nothing
        idx = ((blocks[:, None, None] * bs + np.arange(bs)[None, :, None]) * hkv + g) * d + np.arange(d)[None, None, :]
        k_all = _values(a.k_cache, "k_cache", idx)[:, :, None, :]
        v_all = _values(a.v_cache, "v_cache", idx)[:, :, None, :]
        for i0, i1 in spans:
            cut = n - sq + i1 if n else 0  # the sequence ends after the last row checked
            used = max(1, -(-cut // bs))
            k, v = k_all[:used], v_all[:used]
            qi = ((b * sq + np.arange(i0, i1))[:, None, None] * hq + heads[None, :, None]) * d + np.arange(d)[None, None, :]
            q = _values(a.q, "q", qi)[None]
            args = (q, k, v, np.arange(used, dtype=np.int32)[None], np.array([cut], np.int32))
            kw = dict(
                scale=a.scale,
                window_left=a.window_left,
                softcap=a.softcap,
                alibi_slopes=None if a.alibi_slopes is None else a.alibi_slopes[heads],
                sinks=None if a.sinks is None else a.sinks[heads],
            )
            want.append(_reference.decode_attention(*args, **kw)[0].ravel())
            naive_out = naive(*args, **kw)[0] if naive else _reference.decode_attention(*args, dtype=np.float32, **kw)[0]
            naive_runs.append(naive_out.ravel())
            seen.append(out[b : b + 1, i0:i1, heads[0] : heads[-1] + 1].ravel())
    ref = np.concatenate(want)
    err = tolerance.max_abs_err(np.concatenate(seen), ref)
    allowed = tolerance.allowance(tolerance.max_abs_err(np.concatenate(naive_runs), ref), ref)
    return {"ok": bool(err <= allowed), "max_abs_err": err, "allowed": allowed, "pairs": [list(p) for p in pairs]}


def probabilities(a: _reference.DecodeArgs, head: int, max_cells: int) -> Tuple[np.ndarray, np.ndarray, str]:
    """Query head `head`'s probabilities over the cache positions: a row per (sequence, new
    token), the first sequences whose rows fit `max_cells` (of one long prefill, its first new
    tokens), keys up to the longest of them."""
    bsz, sq, hq, d = a.q.shape
    _, block_size, hkv, _ = a.k_cache.shape
    g = head // (hq // hkv)
    shown = min(sq, max(16, max_cells // max(1, max(a.seq_lens))))  # new tokens a sequence shows
    width = max(1, min(max(a.seq_lens), max_cells // shown))
    rows_p: List[np.ndarray] = []
    rows_m: List[np.ndarray] = []
    for b, n in enumerate(a.seq_lens):
        if rows_p and (len(rows_p) + 1) * shown * width > max_cells:
            break
        n_keys = min(n, width)
        keys = np.arange(n_keys)
        pos = np.arange(n - sq, n - sq + shown)
        mask = (keys[None, :] <= pos[:, None]) & (n > 0)
        if a.window_left >= 0:
            mask &= keys[None, :] >= pos[:, None] - a.window_left
        blocks = a.block_table[b, : -(-n // block_size)] if n else np.zeros(0, np.int64)
        k = a.k_cache[blocks, :, g, :].reshape(-1, d)[:n_keys].astype(np.float64)
        s = a.q[b, :shown, head].astype(np.float64) @ k.T * a.scale
        if a.softcap > 0:
            s = a.softcap * np.tanh(s / a.softcap)
        if a.alibi_slopes is not None:
            s = s + a.alibi_slopes[head] * (keys[None, :] - pos[:, None])
        sink = None if a.sinks is None else np.full(shown, a.sinks[head])
        p, _ = _reference._softmax_with_sink(s, mask, sink, np.dtype(np.float64))
        rows_p.append(p)
        rows_m.append(mask)
    cols = max(x.shape[1] for x in rows_p)
    pad = lambda x, v: np.pad(x, ((0, 0), (0, cols - x.shape[1])), constant_values=v)  # noqa: E731
    probs = np.concatenate([pad(p, 0.0) for p in rows_p])
    mask = np.concatenate([pad(m, False) for m in rows_m])
    some = "" if shown == sq else f" (the first {shown} new tokens of each)"
    return probs, mask, f"rows: (sequence, new token) of the first {len(rows_p)} sequences{some}; columns: cache positions"


def head_view(output: np.ndarray, head: int) -> np.ndarray:
    """Query head `head` of out [B, Sq_new, Hq, D] or lse [B, Sq_new, Hq]: a row per (sequence,
    new token), as `probabilities` lays them out."""
    a = np.asarray(output, dtype=np.float64)
    return a[:, :, head].reshape(a.shape[0] * a.shape[1], -1)


class PagedInterface(Interface):
    """What decode and prefill over the paged cache share: the case's check, its ranges, its
    layout on the default target, and its pictures (a row per sequence and new token)."""

    def checked(self, case: Case) -> _reference.DecodeArgs:
        """The case's arguments through the reference's one check (`checked`)."""
        return checked(case, self.name)

    def live_case(self, config: PagedConfig, tensors: Mapping[str, np.ndarray], name: str) -> Case:
        t = tensors
        return self.case_from_reference(
            *(t[n] for n in INPUTS),
            window_left=config.window_left,
            softcap=float(config.softcap),
            alibi_slopes=t.get("alibi_slopes"),
            sinks=t.get("sinks"),
            name=name,
        )

    def bench_case(self, config: PagedConfig, name: str) -> Case:
        """The live case of `config` with what the GPU fills left to it (the cache; prefill's q too)."""
        return self.live_case(config, config.tensors(filled=True), name)

    def magnitudes(self, case: Case) -> Dict[str, float]:
        """q's largest magnitude, the used blocks' of each cache, |scale| (`magnitudes`)."""
        return magnitudes(self.checked(case))

    def f32_bounds(self, case: Case) -> List[ranges.Bound]:
        """The scores and out's running sum (`f32_bounds`; decode's splits' partial sums together)."""
        return f32_bounds(self.checked(case))

    def layout(self, case: Case) -> Layout:
        """The case laid out for the f32-cache kernel on the default target (wgattn.target)."""
        return self.layout_on(self.kernels()[0], case, DEFAULT)

    def probabilities(self, case: Case, head: int, max_cells: int) -> Tuple[np.ndarray, np.ndarray, str]:
        """Query head `head`'s probabilities over the cache positions: a row per (sequence, new
        token), the first rows of the first sequences that fit `max_cells`."""
        return probabilities(self.checked(case), head, max_cells)

    def head_view(self, case: Case, output: np.ndarray, head: int, heads: int) -> np.ndarray:
        """Query head `head` of out [B, Sq_new, Hq, D] or lse [B, Sq_new, Hq]: a row per (sequence,
        new token), as `probabilities` lays them out."""
        return head_view(output, head)

    def output_axes(self, case: Case, output: str, ndim: int) -> List[str]:
        """out [B, Sq_new, Hq, D], lse [B, Sq_new, Hq]."""
        return ["sequence", "new token", "head", "dim"][:ndim]

    def view_axes(self, case: Case, output: str, ndim: int) -> Tuple[str, str]:
        return "sequence × new token", ("dim" if ndim > 3 else "")

    def probability_axes(self, case: Case) -> Tuple[str, str]:
        return "sequence × new token", "cache position"
