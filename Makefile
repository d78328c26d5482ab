# `make test` and `make demo` work on a fresh clone with nothing but Python:
# each creates .venv when missing and installs the package (editable) first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo install bench lint clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider

demo: $(STAMP)
	$(BIN)/cycle improve examples/quickstart/cycle.yaml --headless --yes

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

lint: $(STAMP)
	$(BIN)/ruff check cycle tests benchmarks

clean:
	rm -rf $(VENV) .cycle reports/*.md reports/*.json reports/*.xml
