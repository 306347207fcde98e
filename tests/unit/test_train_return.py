"""The best training return the driver reports: the best mean of a full window of the latest 100
episodes over the run (``driver/report.py``), a resumed run's earlier best included."""

from types import SimpleNamespace

import pytest

from gorila.actors.tally import RECENT_EPISODES
from gorila.driver.counters import Counters
from gorila.driver.report import Report


def _report(resumed: dict) -> Report:
    """A report with only what judging the training return reads: no target, no services."""
    out = SimpleNamespace(logger=SimpleNamespace(message=lambda line: None))
    return Report(None, SimpleNamespace(train_target=None), SimpleNamespace(services={}), None, out, resumed)


def _counters(returns: list[float]) -> Counters:
    counters = Counters(summed=())
    counters.update("actor", [{"recent_returns": returns, "episodes": len(returns)}])
    return counters


@pytest.mark.parametrize("earlier", [0.0, 5.0])
def test_a_lower_window_leaves_the_best_where_it_was_zero_included(earlier):
    report = _report({"best_train_return": earlier})
    report._judge_training(_counters([-1.0] * RECENT_EPISODES))
    assert report.train_return == -1.0
    assert report.best_train_return == earlier


def test_the_first_full_window_is_the_best_and_a_partial_one_is_not_judged():
    report = _report({})
    report._judge_training(_counters([3.0] * (RECENT_EPISODES - 1)))
    assert report.best_train_return is None and report.train_return is None
    report._judge_training(_counters([-2.0] * RECENT_EPISODES))
    assert report.best_train_return == report.train_return == -2.0
