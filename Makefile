# make demo: create .venv, install shoal with its embedded MPI (mpich wheel), run the main job.
# make test: the whole test suite. make lint: ruff everywhere, mypy on the runtime.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/shoal demo
	$(VENV)/bin/shoal run -n 2 --timeout 5min examples/hello.py
	$(VENV)/bin/shoal run -n 2 --timeout 5min examples/stencil2d.py --n 2048 --blocks 4 --iters 30

test: $(VENV)/.installed
	$(PY) -m pytest -q

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check src tests benchmarks examples
	$(VENV)/bin/mypy

bench: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[peers]'
	$(PY) benchmarks/gossip_merge.py
	$(PY) benchmarks/gossip_sim.py
	$(PY) benchmarks/runtime_messaging.py
	$(PY) benchmarks/runtime_sizes.py
	$(PY) benchmarks/stencil2d.py
	$(PY) benchmarks/runtime_idle.py
	$(PY) benchmarks/runtime_migration.py
	$(PY) benchmarks/runtime_envelopes.py
	$(PY) benchmarks/netmodel_fit.py
	$(PY) benchmarks/mapping_scale.py

clean:
	rm -rf $(VENV) build src/*.egg-info
