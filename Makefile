# netd's human entry points. `make run` and `make test` each set up the host first (idempotent).
VENV   ?= .venv
PY     := $(VENV)/bin/python
ARGS   ?=
PYTEST ?= -q

.PHONY: setup run test test-fast bench lint plugin install clean

setup:  ## install Debian packages, link kernel headers for bcc, build the virtualenv
	@bash .ci/setup-host

# --fabric auto: trying netd must not depend on an installed /etc/netd/netd.toml (which says "hardware")
run: setup  ## run the daemon (emulated fabric when there is no RDMA NIC); ARGS="--listen 0.0.0.0:9469"
	$(PY) -m netd run --fabric auto $(ARGS)

test: setup lint  ## lint, types, the layer rule and the whole suite (root-only tests run as root, as CI is)
	$(PY) -m pytest $(PYTEST)

test-fast: setup  ## the fast tier: everything not marked slow (under a minute on 2 cores)
	$(PY) -m pytest $(PYTEST) -m "not slow"

bench: setup  ## benchmarks, printed as JSON
	$(PY) -m netd bench collect --devices 8 --json
	@if [ "$$(id -u)" = 0 ]; then $(PY) -m netd bench bpf --json; else echo "bench bpf: needs root, skipped"; fi
	$(PY) -m netd bench api --json

lint: setup  ## ruff (lint + format check), mypy, clang-format on the C, and the layer rule of docs/architecture.md
	$(VENV)/bin/ruff check netd cc tests
	$(VENV)/bin/ruff format --check netd cc tests
	$(VENV)/bin/mypy
	clang-format --dry-run -Werror $$(git ls-files '*.c' '*.h')
	$(PY) -m pytest -q -p no:cacheprovider tests/test_layers.py

plugin:  ## build the NCCL tuner plugin; then `make -C nccl_plugin install` (docs/nccl.md)
	$(MAKE) -C nccl_plugin

# --- install: FHS places, DESTDIR-aware (docs/deploy.md) -------------------------------------------
PREFIX     ?= /usr
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system
PYDIR      ?= $(PREFIX)/lib/netd/python
MULTIARCH  := $(shell gcc -print-multiarch 2>/dev/null)
LIBDIR     ?= $(PREFIX)/lib$(if $(MULTIARCH),/$(MULTIARCH))
DATADIR    ?= $(PREFIX)/share/netd
DOCDIR     ?= $(PREFIX)/share/doc/netd
INSTALL_PY ?= /usr/bin/python3
RUN_PY     ?= /usr/bin/python3
# pip's extra arguments: `PIP_INSTALL_ARGS=--no-deps` when the dependencies come from elsewhere
PIP_INSTALL_ARGS ?=

install:  ## package, units, default config, plugin, docs into $(DESTDIR); e.g. DESTDIR=/tmp/pkg
	$(INSTALL_PY) -m pip install --quiet --no-compile --no-build-isolation --upgrade --root-user-action=ignore \
		--target $(DESTDIR)$(PYDIR) $(PIP_INSTALL_ARGS) .
	install -d $(DESTDIR)$(PREFIX)/bin
	sed -e 's|@PYDIR@|$(PYDIR)|g' -e 's|@PYTHON@|$(RUN_PY)|g' deploy/netd.sh.in > $(DESTDIR)$(PREFIX)/bin/netd
	chmod 0755 $(DESTDIR)$(PREFIX)/bin/netd
	install -D -m 0644 -t $(DESTDIR)$(UNITDIR) deploy/systemd/netd.service deploy/systemd/netd-fabric.service
	install -D -m 0644 deploy/systemd/tuning.conf $(DESTDIR)$(DATADIR)/systemd/tuning.conf
	@# the configuration is the operator's once installed: never overwrite it
	install -d -m 0755 $(DESTDIR)$(SYSCONFDIR)/netd
	for f in netd.toml fabric.toml; do \
		[ -e $(DESTDIR)$(SYSCONFDIR)/netd/$$f ] || install -m 0644 deploy/$$f $(DESTDIR)$(SYSCONFDIR)/netd/$$f; \
	done
	@# the eBPF programs' C, compiled by bcc at start ([bpf]) and by the lab: netd looks for them beside
	@# its packages (netd.sources.bpf_layout.EBPF_DIR)
	install -D -m 0644 -t $(DESTDIR)$(PYDIR)/ebpf ebpf/*.c ebpf/*.h
	$(MAKE) -C nccl_plugin install DESTDIR=$(DESTDIR) LIBDIR=$(LIBDIR)
	install -D -m 0644 -t $(DESTDIR)$(DATADIR)/dashboards dashboards/*.json
	install -D -m 0644 -t $(DESTDIR)$(DATADIR)/dashboards/rules dashboards/rules/*.yml
	install -D -m 0644 -t $(DESTDIR)$(DOCDIR) README.md docs/*.md

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
