"""Chunked prefill over a paged cache, the cases the suite times in the page (bench/suite.py
--prefill NAME,...): each a kernel of the `paged_prefill` interface on one configuration
(wgattn.interfaces.paged_prefill.PrefillConfig), q and the cache filled on the GPU, its output
checked on its first and last new tokens against the float64 reference before it is timed, and
timed by the protocol as FLOP/s of the visible (query, key) pairs beside flash_fwd on the same work
unpaged (the interface's yardstick: the new tokens as packed queries against each sequence's whole
cache, causal bottom-right), in one series. Records: OUT/prefill.jsonl (wgattn.bandwidth.rate_record,
pct_of_yardstick the kernel's share of the yardstick's TFLOP/s).

    python3 -m bench.prefill            the cases, one a line (name, kernel, configuration)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, Tuple

from wgattn.interfaces.paged_prefill import PrefillConfig

F16, F32 = "paged_prefill.smx_f16", "paged_prefill.smx"
# The target: 8 sequences, 2,048 new tokens each over a 32k-token cache, GQA 32:8, D 128, an f16
# cache in blocks of 16.
TARGET = PrefillConfig(batch=8, new_tokens=2048, heads=32, heads_kv=8, seq_len=32768, head_dim=128, block_size=16, ragged=False)


def cases() -> Dict[str, Tuple[str, PrefillConfig]]:
    """name -> (the kernel timed, its configuration): the target first, then an f32 cache, blocks
    of 64, a whole prompt prefilled at once (its new tokens fill the cache), a 64k-token cache
    (its output checked against the float64 reference before it is timed, on the GPU), and the
    target on plain arithmetic (an adapter without subgroup matrices: every browser)."""
    return {
        "target": (F16, TARGET),
        "target-f32-cache": (F32, TARGET),
        "target-bs64": (F16, replace(TARGET, block_size=64)),
        "whole-prompt-8k": (F16, replace(TARGET, new_tokens=8192, seq_len=8192)),
        "long-64k": (F16, replace(TARGET, batch=1, new_tokens=1024, seq_len=65536)),
        "target-tiled": ("paged_prefill.tiled", TARGET),
    }


def smoke(config: PrefillConfig) -> PrefillConfig:
    """The case shrunk to 2 sequences of at most 300 tokens, 48 new ones, 8 query heads (the GQA
    ratio kept): does the script run? (seconds a run on a software adapter)"""
    heads = min(config.heads, 8)
    return replace(
        config,
        batch=min(config.batch, 2),
        seq_len=min(config.seq_len, 300),
        new_tokens=min(config.new_tokens, 48),
        heads=heads,
        heads_kv=max(1, config.kv_heads * heads // config.heads),
    )


if __name__ == "__main__":
    for name, (kernel, config) in cases().items():
        print(name, kernel, config.to_dict())
