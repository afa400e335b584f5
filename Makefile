# karpenter-py developer entry points. Everything a test needs is installed from here.
PYTHON ?= .venv/bin/python
PY_BOOT ?= python3
SHARED ?= ../shared

.PHONY: venv demo plan test lint typecheck imports unit crds catalog bench bench-e2e chaos clean helm

venv: .venv/.installed
.venv/.installed: pyproject.toml
	$(PY_BOOT) -m venv .venv
	@echo "installing Python packages into .venv (log: .venv/install.log)"
	@( $(PYTHON) -m pip install --upgrade pip && $(PYTHON) -m pip install -e '.[dev]' ) > .venv/install.log 2>&1 \
		|| { tail -40 .venv/install.log; exit 1; }
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
test: venv lint imports typecheck controlplane helm image
	$(PYTHON) -m pytest -q -p no:cacheprovider tests

# A real helm binary from Go modules (helm.sh/helm/v3), cached in ~/.cache/karpenter-py/helm/<hash>;
# the chart tests (tests/helm) find it through tests/helmtool.py.
helm:
	bash hack/helm/build.sh

# The controller image (linux/amd64 + linux/arm64) from Debian bookworm's packages and the locked
# wheels, no Docker: an OCI image layout in dist/image, cached in ~/.cache/karpenter-py/image/<hash>;
# the image tests (tests/image) find it through tests/imagetool.py.
.PHONY: image
image: venv
	bash hack/image/build.sh --dist dist/image

crds: venv
	.venv/bin/karpenter-py crds --out manifests/crds

# Regenerate the built-in AWS catalog from moto's EC2 data and the on-demand prices in $(SHARED)
# (../shared beside the clone by default; elsewhere: make catalog SHARED=/path/to/shared).
catalog: venv
	$(PYTHON) scripts/gen_aws_catalog.py $(SHARED)/data/aws-on-demand-prices.json

bench: venv
	$(PYTHON) benchmarks/scheduling.py --pods 5000 --out benchmarks/results/scheduling-5000.json

# The fault-injection matrix on the local control plane (issue 17): every scenario, 20 seeds
# each; e.g. make chaos CHAOS_ARGS="--scenarios kill-random --seeds 3". Not part of `test`.
CHAOS_ARGS ?=
chaos: venv controlplane
	$(PYTHON) benchmarks/chaos.py --out benchmarks/results/chaos.json $(CHAOS_ARGS)

clean:
	rm -rf .venv .mypy_cache .ruff_cache .pytest_cache

-include hack/cluster.mk
