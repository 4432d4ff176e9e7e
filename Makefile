# Set-up, the main experiment and the checks, in one place. Works with a stock Python 3.11 + pip.
#
# Outside a virtual environment, `make` creates .venv with `python3 -m venv` and installs
# into it: Debian, Ubuntu, Fedora and Homebrew Pythons refuse `pip install` outside a venv
# (PEP 668). Inside an active one (VIRTUAL_ENV set), it installs there. PYTHON=... names
# an interpreter that manages its own environment; then nothing is created.
ifdef PYTHON
  VENV_PYTHON := $(PYTHON)
else ifdef VIRTUAL_ENV
  VENV_PYTHON := $(VIRTUAL_ENV)/bin/python
else
  BOOTSTRAP_PYTHON ?= python3
  VENV := .venv
  VENV_PYTHON := $(VENV)/bin/python
endif
PY := $(VENV_PYTHON)
EXPERIMENT ?= rocchio_sweep
STAMP := $(if $(VENV),$(VENV)/.install.stamp,.make-install.stamp)

.PHONY: install run test check lint typecheck docs unit compiled gate bench clean samples doctest-slow

# The venv's own pip is the interpreter's bundled one (Debian 12: pip 23.0.1), whose
# resolver fails on lxml[html_clean] asked for under two spellings (trafilatura and
# readability-lxml): "Candidate is not for this requirement". A pinned newer pip comes first.
# --no-compile: pip would byte-compile all ~7,800 modules it installs (about 40 s of CPU);
# Python compiles the few hundred a command imports the first time it imports them, and
# writes them to __pycache__ for the next process. Not where PYTHONDONTWRITEBYTECODE is set
# (as in many container images): nothing would be written, so every process would compile
# pandas, scipy and hydra again (~5 s of CPU each), and pip compiles them once instead.
PIP_INSTALL := -m pip install --quiet --disable-pip-version-check \
  $(if $(PYTHONDONTWRITEBYTECODE),,--no-compile)
ifdef VENV
$(VENV_PYTHON):
	$(BOOTSTRAP_PYTHON) -m venv $(VENV)
	$(VENV_PYTHON) $(PIP_INSTALL) 'pip==25.3'
endif

$(STAMP): pyproject.toml requirements.lock | $(VENV_PYTHON)
	$(PY) $(PIP_INSTALL) -c requirements.lock -e '.[dev,docs,pages]'
	@touch $(STAMP)

install: $(STAMP)

## make run: set up, run the main experiment from the cassettes, print the report's path
run: $(STAMP)
	$(PY) -m evidence_bench run +experiment=$(EXPERIMENT)

## make test: set up, then lint, type check, the manual and the tests, the regression gate
## among them (tests/test_gate.py runs `run +experiment=ci` and `check` against
## baselines/ci.yaml, as `make gate` does). The checks are one core each and the tests
## spread over every core (pytest-xdist), so all run side by side and no core waits for
## the slowest. No -O: pytest streams its progress as it runs (-O held it ~100 s).
##
## The manual and the tests wait for one `pytest --collect-only` (compiled), which lint and
## the type check do not need: it imports what the test modules import, so Python writes
## their bytecode and pytest its rewritten test modules, once. Without it each pytest-xdist
## worker and Sphinx compiled the same modules side by side at the start (pip installs with
## --no-compile), ~15 s of CPU each on a clean clone. Not where PYTHONDONTWRITEBYTECODE is
## set: nothing would be written.
COMPILED := $(if $(PYTHONDONTWRITEBYTECODE),,compiled)
test: $(STAMP)
	@$(MAKE) --no-print-directory -j4 lint typecheck docs unit COMPILED=$(COMPILED)

check: test

## lint: ruff, and the layers contract in pyproject.toml ([tool.importlinter]): each layer
## imports only those below it, and no modules import each other in a circle
lint: $(STAMP)
	$(PY) -m ruff check evidence_bench tests benchmarks docs
	$(PY) -m ruff format --check evidence_bench tests benchmarks docs
	$(PY) -c 'from importlinter.cli import lint_imports_command as c; c()' --no-cache

typecheck: $(STAMP)
	$(PY) -m mypy

## make docs: build the manual into docs/_build/html, warnings as errors. -E rereads every
## page: the references are generated from the code, which Sphinx does not watch.
docs: $(STAMP) $(COMPILED)
	$(PY) -m sphinx -E -W --keep-going -q -b html docs docs/_build/html

## make unit: the tests, spread over every core a file at a time, so a module's fixture (an
## experiment run once for the module) is still computed once; the files of tests that share
## nothing (tests/conftest.py, ONE_TEST_A_UNIT: the manual's pages) a test at a time, as
## tests/conftest.py's pytest_xdist_make_scheduler hands them out. (--dist loadgroup would
## spread finer, but xdist 3.8 cannot mark groups under pytest 9.2, whose nodeid is _id.)
## --no-loadscope-reorder: hand out the files in collection order, the longest first
## (tests/conftest.py, LONGEST_FIRST); xdist 3.8 otherwise sorts them by their number of
## tests, which put the files that run whole experiments in few tests (test_attribution,
## test_shards) last, to run alone on one core at the end.
## PYTEST_WORKERS=0 runs them in one process.
PYTEST_WORKERS ?= auto
unit: $(STAMP) $(COMPILED)
	$(PY) -m pytest $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder)

## compiled: make test's first step for the manual and the tests (above); a collection
## error is left for unit to report
compiled: $(STAMP)
	@$(PY) -m pytest --collect-only -q -p no:cacheprovider >/dev/null || true

## make gate: replay the ci experiment and compare it with the committed baseline
gate: $(STAMP)
	$(PY) -m evidence_bench run +experiment=ci progress=false
	$(PY) -m evidence_bench check runs/ci/latest --baseline baselines/ci.yaml

## make doctest-slow: the manual's `slow` commands (rocchio_sweep, validity, the multiruns...),
## each page on a scratch copy; make test runs the others (tests/test_doc_commands.py).
## .ci/run calls it after make test.
doctest-slow: $(STAMP)
	EVIDENCE_BENCH_DOC_SLOW=1 $(PY) -m pytest -p no:xdist -q tests/test_doc_commands.py \
	  -k 'slow_commands'

## make samples: run the manual's commands and write what they print (docs/_samples/*.txt)
## and how long their experiments took (docs/_samples/runtimes.json); commit the result.
## The doc tests fail on a sample that is no longer what its command prints.
samples: $(STAMP)
	EVIDENCE_BENCH_WRITE_SAMPLES=1 EVIDENCE_BENCH_DOC_SLOW=1 $(PY) -m pytest -p no:xdist -q \
	  tests/test_doc_commands.py -k 'page_runs'

bench: $(STAMP)
	$(PY) benchmarks/bench_run.py

clean:
	rm -rf .venv .make-install.stamp .mypy_cache .ruff_cache .pytest_cache docs/_build
