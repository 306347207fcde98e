"""Cumulative counts over workers that may be restarted (a restarted worker counts from zero again)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np


class Counters:
    """The driver's view of every worker's latest report::

        counters = Counters(summed=("env_steps", "episodes"), base={"env_steps": 10_000})  # resumed
        counters.update("bundle", reports)       # one report per worker of the group
        counters.total("env_steps")              # base + every worker's, lost ones included
        counters.restarts                        # reports whose pid changed

    A report with a new ``pid`` comes from a restarted worker: what the old process had counted in
    ``summed`` is kept, so totals never go back. A first report that says ``restarted`` comes from a
    worker restarted before it ever reported (e.g. one that hung in its first chunk).
    """

    def __init__(self, summed: Iterable[str], base: dict[str, float] | None = None):
        self.summed = tuple(summed)
        self.base = dict(base or {})
        self.lost: dict[str, float] = {}
        self.last: dict[tuple[str, int], dict[str, Any]] = {}
        self.restarts = 0

    def update(self, group: str, reports: list[dict[str, Any]]) -> None:
        for k, report in enumerate(reports):
            key = (group, k)
            before = self.last.get(key)
            if before is None and report.get("restarted"):
                self.restarts += 1
            elif before is not None and before.get("pid") != report.get("pid"):
                self.restarts += 1
                for name in self.summed:
                    self.lost[name] = self.lost.get(name, 0) + before.get(name, 0)
            self.last[key] = report

    def total(self, name: str) -> int:
        return int(self.base.get(name, 0) + self.lost.get(name, 0)
                   + sum(r.get(name, 0) for r in self.last.values()))

    def recent_return(self) -> float | None:
        returns = [x for r in self.last.values() for x in r.get("recent_returns", [])]
        return float(np.mean(returns)) if returns else None

    def mean(self, name: str) -> float | None:
        values = [r[name] for r in self.last.values() if r.get(name) is not None]
        return float(np.mean(values)) if values else None
