# whitevec: `make demo` runs the main job, `make test` the suite. Both create .venv and install first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DATA ?= $(abspath ../shared/data)
export WHITEVEC_DATA ?= $(DATA)

# requirements.lock pins every package `make install` installs: the dependencies and these extras. `make lock`
# regenerates it (keeping the pins pyproject still allows; LOCK_FLAGS=--upgrade moves all to the newest).
LOCK := requirements.lock
LOCK_EXTRAS := dev,serve,milvus,milvus-server,ray,docs,langchain,llamaindex,mcp
# The CPU wheel: a plain `torch` requirement resolves the CUDA build and its nvidia-* packages (GBs).
TORCH_PIN ?= torch==2.13.0
LOCK_VENV ?= .venv-lock
PIP_TOOLS ?= pip==26.3 pip-tools==7.7.0
LOCK_ARGS := --allow-unsafe --all-build-deps --strip-extras --no-emit-index-url --no-emit-find-links --extra=$(LOCK_EXTRAS) \
  --upgrade-package='$(TORCH_PIN)' --output-file=$(LOCK) pyproject.toml
LOCK_FLAGS ?=
# The peer for docs/results/static.md: Model2Vec's distiller needs transformers<5.4, so it gets a venv of its own.
M2V_VENV ?= .venv-m2v
M2V_REQS := benchmarks/peers/model2vec/requirements.txt
# The peers of docs/results/peers.md (txtai, LanceDB, Chroma, Qdrant Edge, Milvus Lite): pyproject's `bench` extra,
# locked apart from requirements.lock (`make lock-peers`) and installed in a venv of their own (`make peers`).
PEERS_LOCK := benchmarks/peers/requirements.lock
PEERS_VENV ?= .venv-peers
PEERS_LOCK_ARGS := --allow-unsafe --all-build-deps --strip-extras --no-emit-index-url --no-emit-find-links --extra=bench \
  --upgrade-package='$(TORCH_PIN)' --output-file=$(PEERS_LOCK) pyproject.toml
# mutate: mutation testing of one module with the tests of its change (tools/mutate.py; docs/development.md).
MUT_VENV ?= .venv-mut
MUT_REQS := tools/mutation-requirements.txt
MODULE ?=
TESTS ?=
# test: the suite in TEST_WORKERS processes (pytest-xdist, whole files per worker: module fixtures made once;
# `make test TEST_WORKERS=auto` takes every core, each worker holding its own models; 0 runs it in this process).
TEST_WORKERS ?= 2
# test-latest: the newest releases pyproject's ranges allow, in a venv of their own (drift before users see it).
LATEST_VENV ?= .venv-latest

.PHONY: install lock lock-peers peers demo test test-latest docs reference lint results-sts bench clean peer-m2v mutate

# The venv is rebuilt from nothing whenever the lock changes, so it holds the locked set and nothing else.
# The copy of the lock marks a venv installed from it (tests/test_lock.py then compares the two).
$(VENV)/.locked: $(LOCK)
	$(PYTHON) -m venv --clear $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r $(LOCK)
	cp $(LOCK) $@

# No build isolation: the package builds with the locked setuptools.
$(VENV)/.installed: $(VENV)/.locked pyproject.toml
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

install: $(VENV)/.installed

demo: install
	$(VENV)/bin/whitevec eval --model all-MiniLM-L6-v2 --tasks stsb \
	  --pooling cls,embeddings-avg,last-avg,first-last-avg \
	  --transform none,whitening,whitening-128,whitening-256 --fit-on target --json out/demo.json

test: install
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

lint: install
	$(VENV)/bin/ruff check src tests benchmarks tools
	$(VENV)/bin/ruff format --check src tests benchmarks tools
	$(VENV)/bin/mypy

results-sts: install
	$(PY) benchmarks/maintained/results_sts.py

lock:
	test -x $(LOCK_VENV)/bin/pip-compile || { $(PYTHON) -m venv $(LOCK_VENV) && \
	  $(LOCK_VENV)/bin/python -m pip install -q $(PIP_TOOLS); }
	CUSTOM_COMPILE_COMMAND="pip-compile $(LOCK_ARGS)" $(LOCK_VENV)/bin/pip-compile -q $(LOCK_ARGS) $(LOCK_FLAGS)

# Unpinned on purpose: the package's ranges, as a user's `pip install whitevec[...]` resolves them today.
test-latest:
	$(PYTHON) -m venv --clear $(LATEST_VENV)
	$(LATEST_VENV)/bin/python -m pip install -q --upgrade pip
	$(LATEST_VENV)/bin/python -m pip install -q -e ".[$(LOCK_EXTRAS)]" "$(TORCH_PIN)"
	$(LATEST_VENV)/bin/python tests/test_lock.py
	$(LATEST_VENV)/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The CLI and HTTP reference pages and openapi.json, generated from the code and committed (the tests and
# `make docs` fail on stale ones): run after changing a command, an option or an HTTP schema.
reference: install
	$(PY) docs/hooks/cli_reference.py
	$(PY) docs/hooks/http_reference.py

clean:
	rm -rf $(VENV) $(LATEST_VENV) $(LOCK_VENV) $(M2V_VENV) $(PEERS_VENV) $(MUT_VENV) out site .pytest_cache .mypy_cache .ruff_cache

$(M2V_VENV)/.installed: $(M2V_REQS)
	$(PYTHON) -m venv --clear $(M2V_VENV)
	$(M2V_VENV)/bin/python -m pip install -q --upgrade pip
	$(M2V_VENV)/bin/python -m pip install -q -r $(M2V_REQS)
	cp $(M2V_REQS) $@

peer-m2v: $(M2V_VENV)/.installed

lock-peers:
	test -x $(LOCK_VENV)/bin/pip-compile || { $(PYTHON) -m venv $(LOCK_VENV) && \
	  $(LOCK_VENV)/bin/python -m pip install -q $(PIP_TOOLS); }
	CUSTOM_COMPILE_COMMAND="make lock-peers" $(LOCK_VENV)/bin/pip-compile -q $(PEERS_LOCK_ARGS) $(LOCK_FLAGS)

# whitevec itself goes in editable (no deps: the lock holds them), so the peers' bench runs the working tree.
$(PEERS_VENV)/.installed: $(PEERS_LOCK) pyproject.toml
	$(PYTHON) -m venv --clear $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install -q --upgrade pip
	$(PEERS_VENV)/bin/python -m pip install -q -r $(PEERS_LOCK)
	$(PEERS_VENV)/bin/python -m pip install -q --no-deps --no-build-isolation -e .
	cp $(PEERS_LOCK) $@

peers: $(PEERS_VENV)/.installed

bench: install
	$(PY) benchmarks/maintained/run_all.py

# mutmut's venv sees the project's packages through a .pth file (see $(MUT_REQS)); rebuilt when either changes.
$(MUT_VENV)/.installed: $(MUT_REQS) $(VENV)/.installed
	$(PYTHON) -m venv --clear $(MUT_VENV)
	$(PY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" > \
	  "$$($(MUT_VENV)/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/_project_venv.pth"
	$(MUT_VENV)/bin/python -m pip install -q -c $(LOCK) -r $(MUT_REQS)
	cp $(MUT_REQS) $@

# make mutate MODULE=index/sign_codes.py TESTS="tests/test_one_bit.py" (one worker: a shared machine).
mutate: $(MUT_VENV)/.installed
	@test -n "$(MODULE)" -a -n "$(TESTS)" || { echo 'make mutate MODULE=path/under/src/whitevec.py TESTS="tests/..."'; exit 2; }
	$(MUT_VENV)/bin/python tools/mutate.py $(MODULE) $(TESTS)
