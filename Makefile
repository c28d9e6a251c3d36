# The two commands a newcomer needs: `make crawl` (a crawl end to end on a local broker) and
# `make test` (lint, types, then every test against a real Kafka broker).
PYTHON ?= python3

.PHONY: install jars lint test test-unit crawl bench clean

install:
	$(PYTHON) -m pip install -e ".[dev]"

jars:
	$(PYTHON) -m streamcrawl.cli kafka jars

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m mypy

test: lint
	$(PYTHON) -m pytest

test-unit:
	$(PYTHON) -m pytest tests/unit

crawl:
	$(PYTHON) -m streamcrawl.cli demo

bench:
	$(PYTHON) -m tests.bench.bench_e2e

clean:
	rm -rf .streamcrawl .pytest_cache .mypy_cache .ruff_cache .hypothesis
