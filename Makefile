# `make run` and `make test` each set up everything on a fresh machine (a .venv with the
# CPU build of PyTorch first, then gorila and its extras) and then run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# torch==2.13.0 is installed before the package so that pip never resolves `torch>=2.2`
# to a multi-gigabyte CUDA build on machines without a GPU.
TORCH_SPEC ?= torch==2.13.0

.PHONY: setup run test bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q $(TORCH_SPEC)
	$(BIN)/python -m pip install -q -e ".[dev,atari,box2d]"
	touch $@

setup: $(VENV)/.installed

run: setup
	$(BIN)/gorila train

test: setup
	$(BIN)/python -m pytest

bench: setup
	$(BIN)/gorila bench ps
	$(BIN)/gorila bench speedup --algo lstsq --workers 1,2 --mode sync
	$(BIN)/gorila bench sampling --env CartPole-v1
	$(BIN)/gorila bench learner --env CartPole-v1

clean:
	rm -rf $(VENV) runs build src/*.egg-info
