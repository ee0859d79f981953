# The two commands a fresh machine needs (README): `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8080

.PHONY: demo test test-fast bench install clean lock

# Reinstall when the package metadata changes.
$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "Python >= 3.11 is required (found $$($(PYTHON) --version))"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

install: $(VENV)/.installed

## The gateway with embedded SQLite in front of the bundled scripted upstream.
demo: install
	$(BIN)/gateway demo --port $(PORT)

## The whole suite: unit, end-to-end through `gateway serve` (on SQLite and on a private PostgreSQL),
## the dashboard's queries against a real Prometheus, and against a real Llama Stack.
test: install
	scripts/ensure-valgrind.sh
	scripts/postgres/setup.sh
	scripts/prometheus/setup.sh
	scripts/llama-stack/setup.sh
	GATEWAY_REQUIRE_LLAMA_STACK=1 GATEWAY_REQUIRE_POSTGRES=1 GATEWAY_REQUIRE_PROMETHEUS=1 $(BIN)/python -m pytest

## Everything except the real-Llama-Stack tests (no 1-minute install).
test-fast: install
	scripts/ensure-valgrind.sh
	scripts/postgres/setup.sh
	scripts/prometheus/setup.sh
	GATEWAY_REQUIRE_POSTGRES=1 GATEWAY_REQUIRE_PROMETHEUS=1 $(BIN)/python -m pytest -m "not llama_stack"

## Gateway vs direct upstream (see bench/README.md).
bench: install
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .cache .pytest_cache

## deploy/requirements.lock: the image's runtime dependencies, resolved in a fresh Python 3.12 venv.
lock:
	rm -rf .cache/lock-venv && python3.12 -m venv .cache/lock-venv
	.cache/lock-venv/bin/pip install --quiet --disable-pip-version-check .
	{ sed -n '1,3p' deploy/requirements.lock; .cache/lock-venv/bin/pip freeze --exclude gateway; } > deploy/requirements.lock.new
	mv deploy/requirements.lock.new deploy/requirements.lock
