# Two commands on a fresh machine: `make demo` and `make test`. Both set up what is missing first.
PY := .venv/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
export XDG_RUNTIME_DIR ?= /tmp/wgattn-xdg

.PHONY: setup demo test test-fast
setup:
	@bash scripts/setup.sh

demo: setup
	@echo "wgattn demo: open http://$(HOST):$(PORT)/ in a browser with WebGPU"
	.venv/bin/uvicorn app:main --host $(HOST) --port $(PORT)

test: setup
	$(PY) -m pytest

# Python tests only, no browser.
test-fast: setup
	$(PY) -m pytest tests
