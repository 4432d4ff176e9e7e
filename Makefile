# Set-up, the main experiment and the checks, in one place. Works with plain Python 3.11 + pip.
PYTHON ?= python3
EXPERIMENT ?= rocchio_sweep
STAMP := .make-install.stamp

.PHONY: install run test check lint typecheck unit gate bench clean

$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

## make run: set up, run the main experiment from the cassettes, print the report's path
run: $(STAMP)
	$(PYTHON) -m evidence_bench run +experiment=$(EXPERIMENT)

## make test: set up, then lint, type check, tests and the regression gate
test: $(STAMP) lint typecheck unit gate

check: test

lint: $(STAMP)
	$(PYTHON) -m ruff check evidence_bench tests benchmarks
	$(PYTHON) -m ruff format --check evidence_bench tests benchmarks

typecheck: $(STAMP)
	$(PYTHON) -m mypy

unit: $(STAMP)
	$(PYTHON) -m pytest

## make gate: replay the ci experiment and compare it with the committed baseline
gate: $(STAMP)
	$(PYTHON) -m evidence_bench run +experiment=ci progress=false
	$(PYTHON) -m evidence_bench check runs/ci/latest --baseline baselines/ci.yaml

bench: $(STAMP)
	$(PYTHON) benchmarks/bench_run.py

clean:
	rm -rf $(STAMP) .mypy_cache .ruff_cache .pytest_cache
