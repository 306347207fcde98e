"""The best training return the driver reports: the best mean of a full window of the latest 100
episodes over the run (``driver/report.py``), a resumed run's earlier best included."""

import numpy as np
import pytest

from gorila.actors.tally import RECENT_EPISODES
from gorila.config import RunConfig
from gorila.driver.counters import Counters
from gorila.driver.plan import Budget, Placed, Plan
from gorila.driver.progress import Progress
from gorila.driver.report import Outputs, Report
from gorila.metrics import RunLogger
from gorila.metrics.terminal import QUIET, Terminal
from gorila.params import ServerSpec, UpdateRule
from gorila.runtime.local import LocalShards
from role_fakes import EvaluationStandIn


@pytest.fixture
def report_of(tmp_path):
    """A report with only what judging the training return reads: no target, no services, no evaluation."""
    loggers: list[RunLogger] = []

    def report(resumed: dict) -> Report:
        spec = ServerSpec(rule=UpdateRule.asynchronous())
        plan = Plan(algo="test", label="fake", initial_params=lambda: np.zeros(1, np.float32), spec=spec,
                    groups=lambda services: [], evaluation=EvaluationStandIn(), budget=Budget(10, "env_steps"),
                    processes=1, chunk_steps=lambda updates: 1)
        placed = Placed(LocalShards(spec, plan.initial_params(), 10.0), services={}, groups={})
        run_dir = tmp_path / f"run{len(loggers)}"
        logger = RunLogger(run_dir, {}, (), tensorboard=False)
        loggers.append(logger)
        out = Outputs(run_dir, logger, Terminal(QUIET))
        return Report(RunConfig(), plan, placed, Progress.resumed("env_steps", {}), out, resumed)

    yield report
    for logger in loggers:
        logger.close({})


def _counters(returns: list[float]) -> Counters:
    counters = Counters(summed=())
    counters.update("actor", [{"recent_returns": returns, "episodes": len(returns)}])
    return counters


@pytest.mark.parametrize("earlier", [0.0, 5.0])
def test_a_lower_window_leaves_the_best_where_it_was_zero_included(report_of, earlier):
    report = report_of({"best_train_return": earlier})
    report._judge_training(_counters([-1.0] * RECENT_EPISODES))
    assert report.train_return == -1.0
    assert report.best_train_return == earlier


def test_the_first_full_window_is_the_best_and_a_partial_one_is_not_judged(report_of):
    report = report_of({})
    report._judge_training(_counters([3.0] * (RECENT_EPISODES - 1)))
    assert report.best_train_return is None and report.train_return is None
    report._judge_training(_counters([-2.0] * RECENT_EPISODES))
    assert report.best_train_return == report.train_return == -2.0
