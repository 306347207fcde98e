"""Cumulative counts over workers that may be restarted (a restarted worker counts from zero again)."""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any

import numpy as np

from gorila.actors.tally import RECENT_EPISODES


class Counters:
    """The driver's view of every worker's latest report::

        counters = Counters(summed=("env_steps", "episodes"), base={"env_steps": 10_000})  # resumed
        counters.update("bundle", reports)       # one report per worker of the group
        counters.total("env_steps")              # base + every worker's, lost ones included
        counters.restarts                        # reports whose pid changed
        counters.failed("bundle", 1, "env_failures", 5)   # what a worker's error says it counted
        counters.recent_return()                 # mean return of the run's latest 100 episodes

    A report with a new ``pid`` comes from a restarted worker: what the old process had counted in
    ``summed`` is kept, so totals never go back. A first report that says ``restarted`` comes from a
    worker restarted before it ever reported (e.g. one that hung in its first chunk).

    Each report lists its worker's latest ``recent_returns`` and counts its ``episodes``; the
    episodes new since that worker's previous report join the run's latest :data:`RECENT_EPISODES`
    (a report may be read more than once: only the count tells what is new).
    """

    def __init__(self, summed: Iterable[str], base: dict[str, float] | None = None):
        self.summed = tuple(summed)
        self.base = dict(base or {})
        self.lost: dict[str, float] = {}
        self.last: dict[tuple[str, int], dict[str, Any]] = {}
        self.restarts = 0
        self.returns: collections.deque[float] = collections.deque(maxlen=RECENT_EPISODES)

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
                before = None  # a new process: all its episodes are new
            self._take_returns(report, 0 if before is None else before.get("episodes", 0))
            self.last[key] = report

    def failed(self, group: str, k: int, name: str, count: int) -> None:
        """Worker ``k`` of ``group`` failed having counted ``count`` of ``name`` in all (its error
        says so), more than its last report did: the totals count them."""
        before = self.last.get((group, k), {})
        self.last[(group, k)] = {**before, name: max(count, before.get(name, 0))}

    def _take_returns(self, report: dict[str, Any], seen: int) -> None:
        returns = report.get("recent_returns", [])
        new = min(report.get("episodes", len(returns)) - seen, len(returns))
        if new > 0:
            self.returns.extend(returns[-new:])

    def total(self, name: str) -> int:
        return int(self.base.get(name, 0) + self.lost.get(name, 0)
                   + sum(r.get(name, 0) for r in self.last.values()))

    def window_full(self) -> bool:
        """Whether the run has played a full window of :data:`RECENT_EPISODES` episodes."""
        return len(self.returns) == RECENT_EPISODES

    def recent_return(self) -> float | None:
        """The mean return of the run's latest (up to) 100 episodes; None before the first."""
        return float(np.mean(self.returns)) if self.returns else None

    def mean(self, name: str) -> float | None:
        values = [r[name] for r in self.last.values() if r.get(name) is not None]
        return float(np.mean(values)) if values else None
