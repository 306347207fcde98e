# `make run` and `make test` each set up everything on a fresh machine (a .venv with PyTorch first,
# then gorila and its extras) and then run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# PyTorch is installed before the package, pinned, so that pip never resolves `torch>=2.2` on its own.
# It comes from wherever pip is configured to look: on a stock machine that is PyPI, whose Linux
# wheel is the CUDA build (several GB with its CUDA libraries). Without a GPU, take the CPU build
# from PyTorch's own index instead:
#     make run TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_SPEC  ?= torch==2.13.0
TORCH_INDEX ?=

.PHONY: setup run test test-heavy chaos bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) $(TORCH_SPEC)
	$(BIN)/python -m pip install -q -e ".[dev,atari,box2d,video,minatar,mujoco,envpool]"
	touch $@

# An editable install leaves gorila's modules uncompiled, and where PYTHONDONTWRITEBYTECODE is set (as
# container images often set it) Python never caches them: every process of a run, the driver and
# each Ray worker, would compile them again as it starts. Compiled here, as pip compiles an installed
# package; a module edited since is compiled again in memory, as ever.
setup: $(VENV)/.installed
	$(BIN)/python -m compileall -q src

run: setup
	$(BIN)/gorila train

# Two pytest workers, each test file whole on one of them (module fixtures such as the two-node
# cluster start once): on a 2-core machine the suite then keeps both cores busy.
TEST_WORKERS ?= 2

# The linter first (pycodestyle, pyflakes, import order, unused noqa; see [tool.ruff] in pyproject.toml),
# then the type checker (every module of the package and the unit tests, see [tool.mypy] in pyproject.toml).
test: setup
	$(BIN)/ruff check src tests
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

# The integration runs of 10 s or more each (kills, restarts, two nodes, benchmarks end to end), kept out of
# `make test` so that it stays under 5 minutes on a 2-core machine; CI runs both.
test-heavy: setup
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile -m heavy

# The long chaos run: kills a process every 10 s while DQN learns CartPole, beside a run without (prints figures);
# then the evaluator killed again and again while its env raises in evaluation; then runs on Ray ended by SIGHUP
# and by a double Ctrl-C, each continued by --resume.
chaos: setup
	$(BIN)/python -m pytest -m slow -s tests/integration/test_chaos.py

bench: setup
	$(BIN)/gorila bench ps
	$(BIN)/gorila bench speedup --algo lstsq --workers 1,2 --mode sync
	$(BIN)/gorila bench sampling --env CartPole-v1
	$(BIN)/gorila bench learner --env CartPole-v1

clean:
	rm -rf $(VENV) runs build src/*.egg-info
