"""Why varlen_bwd.tiled sums dK and dV in two levels, measured on the adapter at hand: the kernel
as shipped and with its block sums never flushed (every term added into one running sum), on the
1023 x 1024 causal grid case, where the earliest keys' dV sums about 2000 terms.

    .venv/bin/python -m lab.sum_levels.sum_levels

Prints each output's error over its allowance. This is a measurement, not a test: the one-level
sum's margin depends on how the driver rounds (lavapipe's JIT differs per host CPU: 1.13x the
allowance on one, 0.81x on another; the H100 passes it), so no test can assert it everywhere.
docs/runtimes.md records the figures.
"""

from __future__ import annotations

from wgattn import conformance, native, registry
from wgattn.interfaces import varlen_bwd

# The block sum's flush, and the same with a threshold no block reaches (one running sum).
TWO_LEVEL = "if (blk_rows >= SUM_BLOCK) {"
ONE_LEVEL = "if (blk_rows >= 0xffffffffu) {"


def main() -> None:
    rt = native.runtime()
    kernel = registry.load().kernel("varlen_bwd.tiled")
    source = kernel.source()
    if source.count(TWO_LEVEL) != 1:
        raise SystemExit(f"varlen_bwd.tiled no longer flushes its block sums with {TWO_LEVEL!r}: update this script")
    (case,) = [c for c in varlen_bwd.conformance_cases() if c.name.startswith("long-causal-br-d64")]
    print(f"{case.name} on {rt.name}: error / allowance")
    for label, src in (("two-level (shipped)", source), ("one-level", source.replace(TWO_LEVEL, ONE_LEVEL))):
        rows = conformance.run_case(rt, kernel, case, source=src)
        print(f"  {label:20s} " + "  ".join(f"{r['output']} {r['max_abs_err'] / r['allowance']:.2f}" for r in rows))


if __name__ == "__main__":
    main()
