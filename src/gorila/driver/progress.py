"""How far a run is, as the driver's parts share it between chunks: the budget used (from the
workers' counters and the servers' counters at the last row) and the training time::

    progress = Progress.resumed("env_steps", meta)    # meta: the checkpoint's ({} for a new run)
    progress.start_training()
    progress.counters.update("actor", reports)        # as each group's reports come in
    progress.stats = merge_stats(shards.stats())      # at every row
    progress.used()                                   # env steps or updates: what the budget counts
    progress.train_s()                                # training time, a resumed run's earlier time included
    progress.now()                                    # both: {"env_steps": 2000, "train_time_s": 4.2}
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

from gorila.driver.counters import Counters
from gorila.params import ShardStats

#: Summed over every worker (a restarted worker's counts before its restart included).
SUMMED = ("env_steps", "episodes", "pushes_rejected_outlier", "env_failures")


@dataclass
class Progress:
    """The run's counts so far. ``unit`` is the budget's (``env_steps`` or ``updates``);
    ``counters`` hold the workers' latest reports, ``stats`` the servers' counters at the last row;
    ``train_before_s`` is the training time of a resumed run's earlier lives."""

    unit: Literal["env_steps", "updates"]
    counters: Counters
    train_before_s: float = 0.0
    stats: ShardStats = field(default_factory=ShardStats)
    started: float = field(default_factory=time.perf_counter)

    @classmethod
    def resumed(cls, unit: Literal["env_steps", "updates"], meta: dict[str, Any]) -> Progress:
        """Counting on from a checkpoint's ``meta`` (env steps, training time); from zero with ``{}``."""
        return cls(unit, Counters(SUMMED, base={"env_steps": int(meta.get("env_steps", 0))}),
                   float(meta.get("train_time_s", 0.0)))

    def used(self) -> int:
        """How far the budget is used: env steps, or server updates."""
        return self.counters.total("env_steps") if self.unit == "env_steps" else self.stats.updates

    def now(self) -> dict[str, float]:
        """Where the run is: ``{unit: used, "train_time_s": seconds}`` (what an evaluation records of
        the parameters it takes now)."""
        return {self.unit: self.used(), "train_time_s": self.train_s()}

    def start_training(self) -> None:
        self.started = time.perf_counter()

    def train_s(self) -> float:
        return self.train_before_s + time.perf_counter() - self.started
