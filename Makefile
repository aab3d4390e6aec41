# `make demo` and `make test` set up everything they need from a machine with Python 3.10+.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench collector clean

$(STAMP): pyproject.toml setup.py otel_diary/receiver/_otlpscan.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/otel-diary demo

lint: $(STAMP)
	$(BIN)/ruff check otel_diary tests benchmarks
	$(BIN)/mypy

test: lint
	$(BIN)/pytest

# The OpenTelemetry Collector of collector/manifest.yaml (needs Go), cached outside the
# checkout; prints the binary's path. The Collector tests run this themselves.
collector:
	bash collector/build.sh

bench: $(STAMP)
	$(BIN)/python benchmarks/processor_overhead.py
	$(BIN)/python benchmarks/index.py
	$(BIN)/python benchmarks/context.py
	$(BIN)/python benchmarks/redaction.py
	$(BIN)/python benchmarks/receiver_throughput.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
