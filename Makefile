# The two commands: `make demo` runs the main job, `make test` runs the tests.
# Each creates .venv if missing and installs what it needs into it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: help demo test venv clean

help:
	@echo "make demo   # the main job: train a CNN on the bundled digits, save, export, reload, draw the graph"
	@echo "make test   # the test suite"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-demo: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[data,onnx,fast]"
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

demo: $(VENV)/.installed-demo
	$(BIN)/python -m graphc demo

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) build *.egg-info
