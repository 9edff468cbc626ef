# taskcost developer entry points. Everything installs into ./.venv from the repo's own files.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DB ?= taskcost.duckdb
## make run's ports: PORT (OTLP/HTTP, SQL API, dashboards) and GRPC_PORT (OTLP/gRPC, 0 = off). Unset, taskcost's
## settings decide: TASKCOST_PORT / TASKCOST_GRPC_PORT, taskcost.toml, else 4318 and 4317.
PORT ?=
GRPC_PORT ?=
CHROMIUM := /usr/lib/chromium/chromium

.PHONY: install install-browser run demo live-check test-browser-clickhouse test lint unit bench clean

$(STAMP): pyproject.toml setup.py taskcost/normalize/_wire.pyx sdk/pyproject.toml constraints.txt tests/interop/js/package-lock.json
	$(PY) -m venv $(VENV)
	@# uv installs the same pinned set as pip would (the versions are constraints.txt's), in about a third of the time
	$(BIN)/pip install -q -c constraints.txt uv
	$(BIN)/uv pip install -q --python $(BIN)/python --compile-bytecode -c constraints.txt -e ./sdk -e '.[dev,demo]'
	@# bytecode for the editable sources, as pip writes it for installed packages: a command starts ~0.1 s sooner
	@# where Python is told not to write it itself (PYTHONDONTWRITEBYTECODE)
	$(BIN)/python -m compileall -q taskcost sdk/src dashboards >/dev/null
	@# the JavaScript OpenTelemetry SDK, for the interop tests (they skip, saying so, where npm is absent)
	if command -v npm >/dev/null; then npm ci --prefix tests/interop/js --no-audit --no-fund; fi
	touch $(STAMP)

## Debian's chromium, which the dashboards' browser tests drive with Playwright (no browser download). As root it
## is installed with apt; otherwise it must already be there (the tests say so and fail).
$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			chromium fonts-liberation >/dev/null; \
	else echo "install Debian's chromium (apt-get install chromium) for the browser tests"; fi

install-browser: $(CHROMIUM)

install: $(STAMP)

## The main job: the collector (OTLP/HTTP on :4318, SQL API, dashboards; OTLP/gRPC on :4317) on the embedded DuckDB
## file. Other ports: make run PORT=4319 GRPC_PORT=4316 (GRPC_PORT=0 turns OTLP/gRPC off); another file: DB=path.
run: $(STAMP)
	$(BIN)/taskcost serve --db $(DB)$(if $(PORT), --port $(PORT))$(if $(GRPC_PORT), --grpc-port $(GRPC_PORT))

## A live demo: the service on its own database (taskcost-demo.duckdb), fed for 5 minutes (or until Ctrl-C) by a
## simulated fleet of agents through the real SDK and LLM clients against a local fake model server; then up to 2
## minutes while the agents finish their tasks in hand. Another port: make demo PORT=4319 (OTLP/gRPC is off).
demo: $(STAMP)
	$(BIN)/taskcost demo$(if $(PORT), --port $(PORT))

## the newcomer's path while data flows: the demo in the background, every page in Chromium every 30 s
live-check: $(STAMP) install-browser
	$(BIN)/python -m bench.live$(if $(MINUTES), --minutes $(MINUTES))

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

unit: $(STAMP) install-browser
	$(BIN)/python -m pytest -q -n auto

## The README's test command: set up, then lint and the whole suite side by side (mypy keeps one core busy for about
## 40 s from a cold cache: run first, it left the other core idle that long). Either failing fails it.
test: $(STAMP) install-browser
	$(MAKE) --no-print-directory -j2 lint unit

## The whole browser suite against servers on the ClickHouse store (chDB in process, the demo's rows copied in)
test-browser-clickhouse: $(STAMP) install-browser
	TASKCOST_BROWSER_STORE=chdb $(BIN)/python -m pytest -q -n auto tests/browser

## Benchmarks (ingest, queries at 1M/10M calls, SDK overhead): medians and same-run ratios -> bench/RESULTS.md
bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
