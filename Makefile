# stockpool: inventory reservations inside PostgreSQL.
# Every target bootstraps what it needs (system packages via scripts/bootstrap-system,
# the Python venv in .venv). Without DSN=..., targets run on a throwaway cluster.

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STOCKPOOL := $(BIN)/stockpool
DSN ?=
DSN_FLAG := $(if $(DSN),--dsn '$(DSN)',)
RACE_ARGS ?=
BENCH_ARGS ?=
PYTEST_ARGS ?=

.PHONY: help bootstrap install race bench test test-pgtap test-python test-isolation test-monitoring lint schema clean

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  \033[1m%-15s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(VENV)/.stamp: pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/pip install -q --upgrade pip >/dev/null
	@$(BIN)/pip install -q -c constraints.txt -e '.[dev,bench]'
	@touch $@

.system.stamp: scripts/bootstrap-system
	@scripts/bootstrap-system
	@touch $@

bootstrap: $(VENV)/.stamp .system.stamp ## Install system packages (when root) and the Python venv

install: $(VENV)/.stamp ## Deploy stockpool into DSN=postgresql://... (migrations + functions)
	@test -n "$(DSN)" || { echo "usage: make install DSN=postgresql://user@host/db" >&2; exit 2; }
	$(STOCKPOOL) deploy --dsn '$(DSN)'

race: bootstrap ## Race the package under load and check every guarantee (RACE_ARGS=...)
	$(STOCKPOOL) race $(DSN_FLAG) $(RACE_ARGS)

bench: bootstrap ## Side-by-side strategy benchmark (BENCH_ARGS=...)
	$(STOCKPOOL) bench $(DSN_FLAG) $(BENCH_ARGS)

SCRIPTS = scripts/cpu-decomposition scripts/claim-vs-release scripts/pooler-cores scripts/sql-ab scripts/floor scripts/instructions scripts/cell-profile

lint: $(VENV)/.stamp ## ruff, mypy and sqlfluff
	$(BIN)/ruff check src tests/python $(SCRIPTS)
	$(BIN)/ruff format --check src tests/python $(SCRIPTS)
	$(BIN)/mypy
	$(BIN)/mypy --strict --scripts-are-modules $(SCRIPTS)
	$(BIN)/sqlfluff lint sql/migrations sql/views sql/functions sql/routing sql/retired.sql

test-pgtap: bootstrap ## pgTAP suites (pg_prove) on a throwaway cluster
	$(STOCKPOOL) exec -- bash -c 'psql -qX -v ON_ERROR_STOP=1 -c "CREATE EXTENSION IF NOT EXISTS pgtap" && pg_prove --ext .sql -r tests/pgtap'

test-isolation: bootstrap ## PostgreSQL isolation-tester specs on a throwaway cluster
	$(STOCKPOOL) exec -- tests/isolation/run

test-python: bootstrap ## pytest: multi-connection, deploy, race
	$(BIN)/pytest $(PYTEST_ARGS)

test-monitoring: bootstrap ## promtool: the scrape configuration, the alert rules and their unit tests
	promtool check config monitoring/prometheus.yml
	promtool test rules monitoring/rules/stockpool_test.yml

test: lint test-monitoring test-pgtap test-isolation test-python ## Everything CI runs

schema: bootstrap ## Rewrite sql/schema/stockpool.sql from a fresh install
	$(STOCKPOOL) exec -- bash -c '$(BIN)/python -m stockpool.install.schema > sql/schema/stockpool.sql'

clean: ## Remove the venv, caches and results
	rm -rf $(VENV) .system.stamp .pytest_cache .mypy_cache .ruff_cache .hypothesis results/*.json
