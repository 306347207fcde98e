"""The run's normalisation statistics (``--normalize-obs``, ``--normalize-reward``), kept by the
driver: merged from the acting workers' reports, handed back to them and to the evaluation, saved
in every checkpoint and restored on ``--resume``::

    stats = RunStatistics(plan.normalized, plan.evaluation)
    stats.take("actor", reports)        # a chunk's reports in: each one's part merged, and taken out
    stats.hand_back("actor", group)     # before the group's next chunk: every actor normalises alike
    arrays.update(stats.arrays())       # at every checkpoint
    stats.restore(arrays)               # --resume: the checkpoint's, handed back before the first chunk

Each worker reports only what its statistics gathered since its last report, so each part is
merged once (Chan et al.'s formula, :class:`~gorila.envs.normalize.RunningStats`); the merged
statistics then equal those of every observation the actors played, whichever actor played it.
A worker restarted on Ray loses the part of the chunk it did not report, and normalises by its own
statistics until its group's next hand-back.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gorila.core import WorkerGroup
from gorila.driver.plan import Evaluation
from gorila.driver.policy_evaluation import PolicyEvaluation
from gorila.envs.normalize import Statistics

#: The key of a worker's report that carries its statistics' growth (``Normalizer.report``).
REPORT_KEY = "normalization"


class RunStatistics:
    """The statistics of the worker groups ``groups`` (a plan's ``normalized``); the RL plans'
    ``evaluation`` (a :class:`~gorila.driver.policy_evaluation.PolicyEvaluation`) is handed them
    too, and plays each evaluation with those it had when the evaluation began."""

    def __init__(self, groups: tuple[str, ...], evaluation: Evaluation | None = None):
        self.groups = frozenset(groups)
        self.statistics = Statistics()
        self.evaluation = evaluation

    def take(self, group: str, reports: list[dict[str, Any]]) -> None:
        """Merge the part each of ``reports`` carries, removing it from the report (the driver keeps
        reports as counters)."""
        for report in reports:
            part = report.pop(REPORT_KEY, None)
            if part is not None and group in self.groups:
                self.statistics.merge_report(part)
        if any(s is not None for s in (self.statistics.obs, self.statistics.ret)):
            self._tell_evaluation()

    def hand_back(self, group: str, workers: WorkerGroup) -> None:
        """Give ``group``'s workers the run's statistics, where it normalises and there are some."""
        if group in self.groups and self._any():
            workers.call("normalize_with", self.statistics)

    def arrays(self) -> dict[str, np.ndarray]:
        return self.statistics.arrays()

    def restore(self, arrays: dict[str, np.ndarray]) -> None:
        """The statistics a checkpoint's ``arrays`` hold (none where it holds none)."""
        self.statistics = Statistics.from_arrays(arrays)
        if self._any():
            self._tell_evaluation()

    def _any(self) -> bool:
        return self.statistics.obs is not None or self.statistics.ret is not None

    def _tell_evaluation(self) -> None:
        if isinstance(self.evaluation, PolicyEvaluation) and self.groups:
            self.evaluation.normalize_with(self.statistics.copy())
