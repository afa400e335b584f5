# karpenter-py developer entry points. Everything a test needs is installed from here.
PYTHON ?= .venv/bin/python
PY_BOOT ?= python3
SHARED ?= ../shared

.PHONY: venv demo plan test lint typecheck imports unit crds catalog bench clean

venv: .venv/.installed
.venv/.installed: pyproject.toml
	$(PY_BOOT) -m venv .venv
	$(PYTHON) -m pip install -q --upgrade pip
	$(PYTHON) -m pip install -q -e '.[dev]'
	touch $@

# The embedded default: plan a bundled example against the built-in AWS catalog.
demo: venv
	.venv/bin/karpenter-py plan -f examples/demo.yaml

lint: venv
	.venv/bin/ruff format --check .
	.venv/bin/ruff check .

imports: venv
	.venv/bin/lint-imports

typecheck: venv
	.venv/bin/mypy

unit: venv
	$(PYTHON) -m pytest -q tests -m "not cluster"

# Everything CI runs: static checks, then the whole suite (the cluster tests build the control plane).
test: venv lint imports typecheck controlplane
	$(PYTHON) -m pytest -q tests

crds: venv
	.venv/bin/karpenter-py crds --out manifests/crds

bench: venv
	$(PYTHON) benchmarks/scheduling.py --pods 5000 --out benchmarks/results/scheduling-5000.json

clean:
	rm -rf .venv .mypy_cache .ruff_cache .pytest_cache

-include hack/cluster.mk
