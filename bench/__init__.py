"""What a user or CI runs beside the tests, from the repository root as modules
(`python -m bench.suite`): the benchmark suite (suite.py), the committed history and the docs'
tables generated from it (history.py, history/), the suite on a lent GPU machine (devcarry.py,
cdp.py), the decode benchmark (decode_bandwidth.py), the tile sweep (sweep_tiles.py), the
conformance test bed of kernels on subgroup matrices (smx_testbed/), and the demo as `make demo`
serves it, for whatever drives it over real HTTP (demo.py: the suite, the e2e and reliability
tests). Experiments that answered their question live in lab/; nothing here imports them."""
