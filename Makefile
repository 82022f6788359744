# netd's human entry points. `make run` and `make test` each set up the host first (idempotent).
VENV   ?= .venv
PY     := $(VENV)/bin/python
ARGS   ?=
PYTEST ?= -q

.PHONY: setup run test test-fast bench lint plugin clean

setup:  ## install Debian packages, link kernel headers for bcc, build the virtualenv
	@bash .ci/setup-host

run: setup  ## run the daemon (emulated fabric when there is no RDMA NIC); ARGS="--listen 0.0.0.0:9469"
	$(PY) -m netd run $(ARGS)

test: setup lint  ## lint, types, the layer rule and the whole suite (root-only tests run as root, as CI is)
	$(PY) -m pytest $(PYTEST)

test-fast: setup  ## the fast tier: everything not marked slow (under a minute on 2 cores)
	$(PY) -m pytest $(PYTEST) -m "not slow"

bench: setup  ## benchmarks, printed as JSON
	$(PY) -m netd bench collect --devices 8 --json
	@if [ "$$(id -u)" = 0 ]; then $(PY) -m netd bench bpf --json; else echo "bench bpf: needs root, skipped"; fi
	$(PY) -m netd bench api --json

lint: setup  ## ruff (lint + format check), mypy, and the layer rule of docs/architecture.md
	$(VENV)/bin/ruff check netd cc tests
	$(VENV)/bin/ruff format --check netd cc tests
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -p no:cacheprovider tests/test_layers.py

plugin:  ## build the NCCL tuner plugin; then `make -C nccl_plugin install` (docs/nccl.md)
	$(MAKE) -C nccl_plugin

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
