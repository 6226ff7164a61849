# whitevec: `make demo` runs the main job, `make test` the suite. Both create .venv and install first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DATA ?= $(abspath ../shared/data)
TORCH_PIN ?= torch==2.13.0
EXTRAS ?= dev,serve,milvus,ray
export WHITEVEC_DATA ?= $(DATA)

.PHONY: install demo test lint results-sts bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# The CPU wheel first: a plain `torch` requirement would pull a multi-GB CUDA build.
	$(PY) -m pip install -q "$(TORCH_PIN)"
	$(PY) -m pip install -q -e ".[$(EXTRAS)]" "$(TORCH_PIN)"
	touch $@

install: $(VENV)/.installed

demo: install
	$(VENV)/bin/whitevec eval --model all-MiniLM-L6-v2 --tasks stsb \
	  --pooling cls,embeddings-avg,last-avg,first-last-avg \
	  --transform none,whitening,whitening-128,whitening-256 --fit-on target --json out/demo.json

test: install
	$(PY) -m pytest -q

lint: install
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/mypy

results-sts: install
	$(PY) benchmarks/results_sts.py

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache

bench: install
	$(PY) benchmarks/run_all.py
