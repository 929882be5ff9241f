# torchik — set-up and everyday commands. Every target creates .venv if it is missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH := torch==2.13.0
STAMP := $(VENV)/.stamp
CODE := $(wildcard src tests benchmarks experiments scripts)

.PHONY: demo test docs bench lint format clean fuzz gpu-check gpu-check-dry

PIP := $(BIN)/python -m pip install -q --no-compile  # .pyc files are written on first import

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) $(TORCH)

$(STAMP)-demo: $(BIN)/python pyproject.toml
	$(PIP) $(TORCH) -e ".[plot]"
	touch $@

$(STAMP)-test: $(BIN)/python pyproject.toml
	$(PIP) $(TORCH) -e ".[test]"
	touch $@

$(STAMP)-dev: $(BIN)/python pyproject.toml
	$(PIP) $(TORCH) -e ".[dev]"
	touch $@

$(STAMP)-docs: $(STAMP)-dev
	$(PIP) $(TORCH) -e ".[dev,docs]"
	touch $@

$(STAMP)-bench: $(STAMP)-dev
	$(PIP) $(TORCH) -e ".[dev,bench]"
	touch $@

demo: $(STAMP)-demo
	$(BIN)/python -m torchik.demo

# The suite starts hundreds of Python processes (CLI, workers, docs blocks): with
# PYTHONDONTWRITEBYTECODE set (some machines set it) and no .pyc installed, each one compiled
# torch's sources again (a clean clone's suite: 6 min 15 s; with .pyc written: 4 min 49 s).
test: $(STAMP)-test
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -n 2 tests --doctest-modules src/torchik experiments

docs: $(STAMP)-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

fuzz: $(STAMP)-test
	$(BIN)/python -m tests.fuzz.checkpoints --n 1000
	$(BIN)/python -m tests.fuzz.solve_ik --n 5000
	$(BIN)/python -m tests.fuzz.wholebody --n 3000
	$(BIN)/python -m tests.fuzz.api --n 5000
	$(BIN)/python -m tests.fuzz.journals --n 300
	$(BIN)/python -m tests.fuzz.paths
	TORCHIK_FUZZ_EXAMPLES=$${TORCHIK_FUZZ_EXAMPLES:-10000} $(BIN)/python benchmarks/fuzz_urdf.py

lint: $(STAMP)-dev
	$(BIN)/ruff check $(CODE)
	$(BIN)/ruff format --check $(CODE)
	$(BIN)/mypy

format: $(STAMP)-dev
	$(BIN)/ruff check --fix $(CODE)
	$(BIN)/ruff format $(CODE)

bench: $(STAMP)-bench
	$(BIN)/python benchmarks/run.py

# On a GPU machine, with its own Python (PY=python3; no .venv there): tests, kinematics and
# training throughput, results into $(OUT) (default benchmarks/results). At most 8 minutes (BUDGET=480 s).
gpu-check:
	bash scripts/gpu_check.sh

# The same steps, tiny, on this machine's CPU: what gpu-check will run, checked here first.
gpu-check-dry: $(STAMP)-test
	PY=$(BIN)/python OUT=$${OUT:-/tmp/torchik-gpu-check-dry} bash scripts/gpu_check.sh --dry-run

clean:
	rm -rf $(VENV) build dist site *.egg-info src/*.egg-info .pytest_cache .ruff_cache
