# Every target creates/updates .venv itself, so each command works on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-unit e2e-binaries typecheck bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@# setuptools' build-backend notices about editable installs are not problems: keep them out of a first run
	PYTHONWARNINGS=ignore $(BIN)/pip install --quiet -e '.[dev,bench]'
	touch $(STAMP)

## The main job on the shipped example: replay the seed-1 TFJob demo under binpack.
demo: $(STAMP)
	$(BIN)/tessera simulate examples/tfjob-demo.jsonl --config config/binpack.yaml --output table

## The whole test suite, including end-to-end tests on a real kube-apiserver + etcd.
test: $(STAMP) e2e-binaries
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

test-unit: $(STAMP)
	$(BIN)/python -m pytest -q -m 'not e2e'

e2e-binaries:
	@bash hack/build-control-plane.sh >/dev/null

typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python -m bench.core
	$(BIN)/python -m bench.trace

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache
