"""Issue 32, item 2, on Ray: a hang in the evaluator's process is covered by --actor-timeout-s (the
evaluator plays in slices shorter than it and is restarted, counted in worker_restarts), and an
actor whose every process hangs ends the run within the time limit's stated overshoot, failed,
with a final checkpoint and a full summary, instead of waiting out the call timeout."""

import sys

import pytest

from gorila import config
from gorila.config import RunConfig
from gorila.driver.loop import run
from gorila.errors import WorkerTimeoutError
from hang_plans import HangingActor, Pushes, hang_evaluation, plan, saved

pytestmark = [pytest.mark.integration, pytest.mark.heavy, pytest.mark.timeout(300)]
CHUNK_S = 0.2  # the plans' chunk seconds
SAVING_S = 2.0  # past the end, what the run judges and saves last (the best checkpoint), on a loaded machine


@pytest.fixture
def by_value(ray_local):
    """The plans' workers travel to Ray's processes by value (the tests' modules are not installed)."""
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules["hang_plans"])
    yield
    ray.cloudpickle.unregister_pickle_by_value(sys.modules["hang_plans"])


def test_an_evaluator_that_hangs_is_restarted_counted_and_the_time_limit_kept(by_value, tmp_path, monkeypatch):
    monkeypatch.setattr(config, "TIME_LIMIT_GRACE_S", 5.0)  # the stated grace, shortened for the test
    run_config = RunConfig(algo="hang", runtime="ray", run_dir=tmp_path, time_limit_s=20.0, actor_timeout_s=2.0)
    summary = run(run_config, plan([("learner", Pushes, 1)], evaluation=hang_evaluation(), chunk_seconds=CHUNK_S))
    # Each evaluator process plays one evaluation (10 steps) and hangs in its next, at its 20th step.
    assert summary["status"] == "finished" and summary["stop_reason"] == "time_limit"
    assert summary["worker_restarts"] >= 1  # a restarted evaluator that reported
    returns = [e["eval_return"] for e in summary["evaluations"] if "eval_return" in e]
    assert len(returns) >= 2 and len({e["pid"] for e in summary["evaluations"] if "pid" in e}) >= 2
    assert summary["train_time_s"] <= run_config.time_limit_end(CHUNK_S) + SAVING_S
    assert saved(tmp_path)[1]["updates"] == summary["updates"] > 0


def test_an_actor_that_hangs_in_every_process_ends_the_run_within_the_overshoot_everything_saved(
        by_value, tmp_path, monkeypatch):
    monkeypatch.setattr(config, "TIME_LIMIT_GRACE_S", 5.0)  # the stated grace, shortened for the test
    run_config = RunConfig(algo="hang", runtime="ray", run_dir=tmp_path, time_limit_s=5.0, actor_timeout_s=1.0)
    with pytest.raises(WorkerTimeoutError, match="time limit"):
        run(run_config, plan([("actor", HangingActor, 1), ("learner", Pushes, 1)], chunk_seconds=CHUNK_S))
    summary, meta = saved(tmp_path)
    assert summary["status"] == "failed" and summary["stop_reason"] == "timeout"
    assert "actor" in summary["error"] and summary["updates"] == meta["updates"] > 0
    end_s = run_config.time_limit_end(CHUNK_S)  # 5 + 0.2 + 5
    assert end_s <= summary["train_time_s"] <= end_s + 5.0  # not the call timeout (60 s)
