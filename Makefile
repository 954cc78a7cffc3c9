# Two commands on a fresh machine: `make demo` and `make test`. Both set up what is missing first.
PY := .venv/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
export XDG_RUNTIME_DIR ?= /tmp/wgattn-xdg

.PHONY: setup demo test test-fast lint
setup:
	@bash scripts/setup.sh

demo: setup
	@echo "wgattn demo: open http://$(HOST):$(PORT)/ in a browser with WebGPU"
	.venv/bin/uvicorn app:main --host $(HOST) --port $(PORT)

test: setup lint
	$(PY) -m pytest

# The lint gate (ruff; its rules are in pyproject.toml). make test runs it first.
lint: setup
	.venv/bin/ruff check py app tests e2e bench
	.venv/bin/ruff format --check py app tests e2e bench

# Python tests only, no browser.
test-fast: setup
	$(PY) -m pytest tests
