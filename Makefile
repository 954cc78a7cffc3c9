# Two commands on a fresh machine: `make demo` and `make test`. Both set up what is missing first.
PY := .venv/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
export XDG_RUNTIME_DIR ?= /tmp/wgattn-xdg

.PHONY: setup demo test test-fast check typecheck-js bench-gpu
setup:
	@bash scripts/setup.sh

# Ctrl-C stops the server (scripts/foreground.py gives it the terminal, so make exits quietly).
demo: setup
	@echo "wgattn demo: open http://$(HOST):$(PORT)/ in a browser with WebGPU (Ctrl-C stops it)"
	@$(PY) scripts/foreground.py .venv/bin/uvicorn app:main --host $(HOST) --port $(PORT)

# Every core runs tests (pytest-xdist), a test file per worker so that its fixtures are made once;
# then the browser tests, in a pytest of their own: Playwright's sync API leaves an event loop (in a
# greenlet) in its process, where asyncio.run() and ast.parse() of a later test would fail.
test: setup check
	$(PY) -m pytest tests -n auto --dist loadfile
	$(PY) -m pytest e2e

# The developer gate, run first by make test (so by CI): ruff's lint rules and its formatting, mypy on
# py/wgattn (all three configured in pyproject.toml) and TypeScript on the page's JavaScript.
check: setup typecheck-js
	.venv/bin/ruff check py app tests e2e bench lab
	.venv/bin/ruff format --check py app tests e2e bench lab
	.venv/bin/mypy

# The page's JavaScript, type-checked by TypeScript from its JSDoc (tsconfig.json; static/types.d.ts
# declares Pyodide and wgattn.page). Part of make check.
typecheck-js: setup
	node_modules/.bin/tsc -p .

# The developer's loop: the Python tests without the slow tier (tests/conftest.py's SLOW) and
# without the browser; under 90 s on a 2-core machine.
test-fast: setup
	$(PY) -m pytest tests -m "not slow" -n auto --dist loadfile

# The benchmark suite on this machine's GPU, one run: wgpu-py (trusted, checked), PyTorch's SDPA and
# Chromium's WebGPU (robustness on and off), by one protocol; records in .cache/bench/ (python -m bench.suite,
# ARGS="--kernels ... --shapes ..." to choose). A lent machine with no registry: python -m bench.devcarry.
bench-gpu: setup
	PYTHONUNBUFFERED=1 $(PY) -m bench.suite $(ARGS)
