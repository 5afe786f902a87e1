# `make demo` and `make test` set up everything they need in .venv on first use.
# torch is pinned to the CPU build this machine carries (2.13.0); the package itself admits newer.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo demos demo-table test quick bench docs clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install -q --disable-pip-version-check -e ".[dev,data,onnx,matlab,docs,hf]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/attnlab demo digits --out demo-out
	@echo "Open demo-out/digits/report.html. The other demos:"
	@echo "  $(VENV)/bin/attnlab demo vowels|forecast|roman|seed1|seed2-images|seed2-sequences|seed3-qkv --out demo-out [--epochs N]"

# every trained demo over three seeds (a few minutes each), then the README's tables from them
demos: $(STAMP)
	for d in digits vowels forecast roman; do \
		$(VENV)/bin/attnlab demo $$d --seeds 3 --out demo-out || exit 1; done
	$(PY) tools/demo_table.py --runs demo-out

# the README's demo table (from docs/demo-results.json, first updated with the seed summaries
# found in demo-out/) and its benchmark table (from benchmarks/RESULTS.md)
demo-table: $(STAMP)
	$(PY) tools/demo_table.py --runs demo-out

# the browser tests need Chromium: tried once per .venv (never fatal; they skip without it)
$(VENV)/.chromium: .ci/chromium.sh | $(STAMP)
	-sh .ci/chromium.sh
	touch $@

# ruff and mypy first (configuration in pyproject.toml; mypy ~20 s cold, ~1 s with its cache),
# then the whole suite: what CI runs
test: $(STAMP) $(VENV)/.chromium
	$(PY) -m ruff check
	$(PY) -m mypy
	$(PY) -m pytest

# the inner loop (under a minute): ruff, then the tests of the graph, layers, attention,
# streaming, saving, errors, the MATLAB reader and training; `make test` runs them all
QUICK := network/network functional/functional_attention functional/attention_layers \
	functional/attention_stack layers/layer_contract combinators graph/codegen core/arguments \
	core/sequences stream/stream cli/error_catalogue layers/layer_habits io/io io/persistence_habits \
	matlab/matlab matlab/matlab_limits training/train
quick: $(STAMP)
	$(PY) -m ruff check
	$(PY) -m pytest -x -q $(foreach t,$(QUICK),tests/$(dir $(t))test_$(notdir $(t)).py)

# The documentation site (Sphinx, see docs/conf.py), strict: any warning fails the build.
# Offline: the docs extra comes from the package index once, the build itself fetches nothing.
# Open docs/_build/html/index.html from disk.
$(VENV)/.docs: pyproject.toml | $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check -e ".[docs]"
	touch $@

docs: $(VENV)/.docs
	$(PY) -m sphinx -E -W --keep-going -n -q -b html docs docs/_build/html
	@echo "Open docs/_build/html/index.html"

# the bench extra (Keras on its torch backend) is installed for `make bench` only
$(VENV)/.bench: pyproject.toml | $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check -e ".[dev,data,onnx,matlab,bench]"
	touch $@

bench: $(STAMP) $(VENV)/.bench
	$(PY) benchmarks/run_all.py
	$(PY) tools/demo_table.py

clean:
	rm -rf $(VENV) demo-out .pytest_cache docs/_build
