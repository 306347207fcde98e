"""``gorila bench NAME``: each benchmark prints its figure next to the limit measured in the same run."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def _lazy(name: str) -> Callable[[list[str]], int]:
    """``gorila.bench.NAME.main``, imported only when that benchmark runs (some import torch or Ray)."""
    def run(argv: list[str]) -> int:
        return importlib.import_module(f"gorila.bench.{name}").main(argv)
    return run


BENCHMARKS: dict[str, Callable[[list[str]], int]] = {
    name: _lazy(name) for name in ("ps", "speedup", "sampling", "learner", "replay", "apex", "startup", "memory",
                                  "menger", "minatar", "pipeline", "envs")}
