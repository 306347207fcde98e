"""``gorila bench NAME``: each benchmark prints its figure next to the limit measured in the same run."""

from __future__ import annotations

from collections.abc import Callable


def _ps(argv: list[str]) -> int:
    from gorila.bench.ps import main
    return main(argv)


def _speedup(argv: list[str]) -> int:
    from gorila.bench.speedup import main
    return main(argv)


def _sampling(argv: list[str]) -> int:
    from gorila.bench.sampling import main
    return main(argv)


def _learner(argv: list[str]) -> int:
    from gorila.bench.learner import main
    return main(argv)


BENCHMARKS: dict[str, Callable[[list[str]], int]] = {"ps": _ps, "speedup": _speedup, "sampling": _sampling,
                                                     "learner": _learner}
