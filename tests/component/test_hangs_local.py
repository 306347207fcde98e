"""Issue 32, item 2, on the local runtime: an env that hangs in an actor or in the evaluator no
longer stalls the run for good. With --actor-timeout-s the stalled worker is rebuilt (counted in
worker_restarts) and the run goes on; without it, the run ends within its time limit's stated
overshoot, failed, with a final checkpoint and a full summary."""

import time

import pytest

from gorila import config
from gorila.config import RunConfig
from gorila.driver.loop import run
from gorila.envs.fake import HangingEnv
from gorila.errors import WorkerTimeoutError
from hang_plans import HangingActor, Pushes, hang_evaluation, plan, saved

pytestmark = pytest.mark.timeout(60)
CHUNK_S = 0.2  # the plans' chunk seconds
SAVING_S = 2.0  # past the end, what the run judges and saves last (the best checkpoint), on a loaded machine


@pytest.fixture(autouse=True)
def fresh_count():
    """Each test's process-wide step count starts again: its 20th step hangs."""
    HangingEnv.steps_in_process = 0


def test_an_actor_whose_env_hangs_is_rebuilt_after_the_actor_timeout_and_the_run_goes_on(tmp_path):
    summary = run(RunConfig(algo="hang", runtime="local", run_dir=tmp_path, time_limit_s=2.0, actor_timeout_s=1.0),
                  plan([("actor", HangingActor, 1), ("learner", Pushes, 1)], chunk_seconds=CHUNK_S))
    assert HangingEnv.steps_in_process > 20  # it hung at the 20th, and the rebuilt actor stepped on
    assert summary["worker_restarts"] == 1
    assert summary["status"] == "finished" and summary["stop_reason"] == "time_limit"
    assert summary["train_time_s"] <= RunConfig(time_limit_s=2.0).time_limit_end(CHUNK_S) + SAVING_S
    written, meta = saved(tmp_path)
    assert written["worker_restarts"] == 1 and meta["updates"] == summary["updates"] > 0


def test_an_evaluator_whose_env_hangs_is_rebuilt_and_counted_and_evaluations_go_on(tmp_path):
    summary = run(RunConfig(algo="hang", runtime="local", run_dir=tmp_path, time_limit_s=3.0, actor_timeout_s=1.0),
                  plan([("learner", Pushes, 1)], evaluation=hang_evaluation(), chunk_seconds=CHUNK_S))
    assert summary["worker_restarts"] == 1 and summary["status"] == "finished"
    returns = [e["eval_return"] for e in summary["evaluations"] if "eval_return" in e]
    assert len(returns) >= 2 and summary["final_eval_return"] is not None  # one before the hang, more after
    assert summary["train_time_s"] <= RunConfig(time_limit_s=3.0).time_limit_end(CHUNK_S) + SAVING_S
    assert saved(tmp_path)[1]["updates"] == summary["updates"]


@pytest.mark.parametrize("where", ["actor", "evaluator"])
def test_without_an_actor_timeout_a_hang_ends_the_run_within_the_time_limits_overshoot_everything_saved(
        where, tmp_path, monkeypatch):
    monkeypatch.setattr(config, "TIME_LIMIT_GRACE_S", 1.0)  # the stated grace, shortened for the test
    groups = [("learner", Pushes, 1)] + ([("actor", HangingActor, 1)] if where == "actor" else [])
    hung = plan(groups, evaluation=hang_evaluation() if where == "evaluator" else None, chunk_seconds=CHUNK_S)
    run_config = RunConfig(algo="hang", runtime="local", run_dir=tmp_path, time_limit_s=1.0)
    started = time.perf_counter()
    with pytest.raises(WorkerTimeoutError, match="time limit"):
        run(run_config, hung)
    took = time.perf_counter() - started
    summary, meta = saved(tmp_path)
    assert summary["status"] == "failed" and summary["stop_reason"] == "timeout"
    assert "time limit" in summary["error"] and summary["updates"] == meta["updates"] > 0
    end_s = run_config.time_limit_end(CHUNK_S)  # 1 + 0.2 + 1
    assert end_s <= summary["train_time_s"] <= end_s + 2.0  # the call timeout (60 s) was not waited out
    assert took < run_config.call_timeout(CHUNK_S)
