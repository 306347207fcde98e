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

from gorila.checkpoint import Check, Field, check_meta
from gorila.driver.counters import Counters
from gorila.envs.normalize import Statistics
from gorila.params import ShardStats, split_shard_state
from gorila.params.shard import check_state

#: Summed over every worker (a restarted worker's counts before its restart included).
SUMMED = ("env_steps", "episodes", "pushes_rejected_outlier", "env_failures")

#: The fields of a run checkpoint's meta that a resumed run (and a saved run's reader) relies on;
#: :class:`~gorila.driver.report.Report` writes them.
RUN_META = {"env_steps": Field("count"), "updates": Field("count"), "train_time_s": Field("seconds"),
            "time_to_target_s": Field("seconds", nullable=True),
            "train_time_to_target_s": Field("seconds", nullable=True),
            "best_train_return": Field("number", nullable=True),
            "evaluation": Field("mapping", nullable=True, fields={"best_eval_return": Field("number", nullable=True),
                                                                   "next_steps": Field("count")})}


def check_run_meta(arrays: dict[str, Any], meta: dict[str, Any]) -> None:
    """:func:`~gorila.checkpoint.load_checkpoint`'s ``check`` for a run checkpoint read for its meta
    (and its normalisation statistics, which a saved policy plays with)."""
    check_meta(meta, RUN_META)
    Statistics.from_arrays(arrays)


def resumable(num_shards: int) -> Check:
    """:func:`~gorila.checkpoint.load_checkpoint`'s ``check`` for a run checkpoint to resume from:
    its meta (:data:`RUN_META`) and each shard's state (:func:`~gorila.params.shard.check_state`);
    a checkpoint that fails is skipped for the one before, as a damaged one is. (A checkpoint of
    another layout is left to the layout check, which says so in words.)"""
    def check(arrays: dict[str, Any], meta: dict[str, Any]) -> None:
        check_meta(meta, RUN_META)
        Statistics.from_arrays(arrays)  # damaged normalisation statistics refuse it too
        for j, state in enumerate(split_shard_state(arrays, num_shards)):
            if "counters" in state and "params" in state:
                check_state(state, j)
    return check


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
    def resumed(cls, unit: Literal["env_steps", "updates"], meta: dict[str, Any],
                counters: Counters | None = None) -> Progress:
        """Counting on from a checkpoint's ``meta`` (env steps, training time); from zero with ``{}``.
        ``counters`` are the ones an exact resume restored with its workers, whose reports go on
        from where they were (else the workers start from zero, on top of the meta's env steps)."""
        if counters is None:
            counters = Counters(SUMMED, base={"env_steps": int(meta.get("env_steps", 0))})
        return cls(unit, counters, float(meta.get("train_time_s", 0.0)))

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
