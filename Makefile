# Two commands set everything up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-fast docs docs-config lint format bench clean

# uv installs what pip would, about twice as fast (its own resolver, parallel downloads); the
# bytecode is compiled at install time, as pip does, so no process compiles it again. The venv
# gets no pip of its own (4 s of the install): the machine's pip puts uv in it, or, where that
# pip is too old for `--python` (before 22.3), the venv's own, from ensurepip.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv --without-pip $(VENV)
	$(PYTHON) -m pip --python $(BIN)/python install --quiet uv \
		|| { $(BIN)/python -m ensurepip --default-pip && $(BIN)/python -m pip install --quiet uv; }
	$(BIN)/python -m uv pip install --quiet --python $(BIN)/python --compile-bytecode -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	KERAS_BACKEND=tensorflow $(BIN)/python -m tapefit $(ARGS)

# tapefit's and the tests' own bytecode is written once (0.3 s) before the suite, as the install
# does for the packages: with PYTHONDONTWRITEBYTECODE set, each of the suite's fresh
# interpreters compiled the same sources again.
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m compileall -q -j 0 tapefit tests > /dev/null
	KERAS_BACKEND=tensorflow $(BIN)/python -m pytest $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m compileall -q -j 0 tapefit tests > /dev/null
	KERAS_BACKEND=tensorflow $(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

# The docs site with live reload on 127.0.0.1:8000 (the suite builds it with --strict).
docs: $(STAMP)
	KERAS_BACKEND=tensorflow NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs serve

# docs/reference/config.md again from conf/ and the schemas (the build regenerates it too;
# tests/config/test_reference.py fails while the committed copy is stale).
docs-config: $(STAMP)
	$(BIN)/python -c "from tapefit.config.reference import render_markdown as r; open('docs/reference/config.md', 'w').write(r())"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	KERAS_BACKEND=tensorflow $(BIN)/python experiments/benchmark.py $(ARGS)

clean:
	rm -rf $(VENV) outputs multirun site .pytest_cache .ruff_cache
