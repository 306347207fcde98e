"""Environment faults inside evaluation: the env is rebuilt, its episode dropped and counted, and
too many failures fail that evaluation with a clear message, not the run (issue 32, item 1)."""

import functools
import itertools
from collections.abc import Callable

import numpy as np
import pytest
from torch import nn

from evaluation_fakes import Watching, registered
from gorila.driver.policy_evaluation import PolicyEvaluation
from gorila.envs.evaluation import EvaluationEpisodes
from gorila.envs.fake import FlakyEnv
from gorila.errors import EnvFailedError
from gorila.nets import FlatParams
from gorila.nets.q import build_q_network, greedy_policy
from gorila.params import ServerSpec, UpdateRule
from gorila.runtime import LocalRuntime
from role_fakes import GroupStandIn, ReplyStandIn


def flaky_id(how: str, fail_every: int) -> str:
    return registered(f"Flaky-{how}-{fail_every}", FlakyEnv, how=how, fail_every=fail_every)


@pytest.fixture(autouse=True)
def _count_from_zero():
    FlakyEnv.steps_in_process = 0


@pytest.mark.parametrize("how", ["raise", "nan_obs", "nan_reward"])
def test_a_failing_env_in_evaluation_is_rebuilt_and_its_episode_dropped_and_played_again(how):
    played = EvaluationEpisodes(flaky_id(how, 7), episodes=3, epsilon=0.0, seed=0, noop_max=0)
    policy = Watching()
    try:
        assert played.play(policy)
    finally:
        played.close()
    # Every episode is 5 steps paying 1.0: a dropped episode's partial (or NaN) return is not kept.
    assert played.returns == [5.0, 5.0, 5.0]
    assert played.failures.count >= 2
    assert played.failures.last is not None and "Flaky" in played.failures.last
    assert all(np.isfinite(obs).all() for obs in policy.seen)  # the policy never saw a NaN


def test_too_many_failures_in_a_window_fail_the_evaluation_naming_the_last():
    played = EvaluationEpisodes(flaky_id("raise", 1), episodes=2, epsilon=0.0, seed=0, noop_max=0)
    try:
        with pytest.raises(EnvFailedError, match=r"5 environment failures within 1000 steps; the last: "
                                                 r"gorila-test/Flaky-raise-1-v0 env \d: RuntimeError in step"):
            played.play(Watching())
    finally:
        played.close()


def unbuilt(env_id: str) -> Callable[[], nn.Module]:
    """The env's Q-network function, for an evaluation whose evaluator is never started (nothing builds it)."""
    return functools.partial(build_q_network, env_id, (8,), 0)


def _evaluation(env_id: str) -> PolicyEvaluation:
    network_fn = functools.partial(build_q_network, env_id, (8,), 0)
    runtime = LocalRuntime()
    shards = runtime.start_shards(ServerSpec(rule=UpdateRule.asynchronous()), FlatParams(network_fn()).get())
    evaluation = PolicyEvaluation(env_id, network_fn, greedy_policy, episodes=3, epsilon=0.0, seed=0, noop_max=0,
                                  every_s=0.0, target=5.0)
    ticks = itertools.count()
    evaluation.factory = functools.partial(evaluation.factory, clock=lambda: next(ticks) * 1000.0)
    evaluation.start(runtime, shards, {})
    return evaluation


def _judge(evaluation: PolicyEvaluation):
    evaluation.before_chunk({"env_steps": 0, "train_time_s": 0.0})
    return evaluation.finish()


def test_an_evaluation_that_keeps_failing_fails_itself_not_the_run_and_is_counted():
    evaluation = _evaluation(flaky_id("nan_obs", 1))
    score = _judge(evaluation)
    assert not score.reached and np.isnan(score.value)
    assert score.message.startswith("the evaluation at version 0 failed: 5 environment failures")
    assert score.record["eval_failed"] == score.message
    assert score.row == {"eval_env_failures": 5}
    score = _judge(evaluation)  # the evaluator goes on: the next evaluation is played (and fails) too
    assert evaluation.summary()["evaluations_failed"] == 2 and evaluation.summary()["eval_env_failures"] == 10
    assert evaluation.summary()["final_eval_return"] is None


def test_failures_in_an_evaluation_that_completes_reach_its_row_and_the_summary():
    evaluation = _evaluation(flaky_id("raise", 7))
    score = _judge(evaluation)
    assert score.value == 5.0 and score.reached
    failures = score.row["eval_env_failures"]
    assert failures >= 2 and evaluation.summary()["eval_env_failures"] == failures
    assert evaluation.summary()["evaluations_failed"] == 0
    assert "eval_env_failures" in evaluation.columns


def test_a_restarted_evaluator_is_counted_among_worker_restarts_and_its_counts_kept():
    """Issue 32, item 9: a report from a new evaluator process (Ray restarted it) counts a restart;
    what its earlier process counted stays counted."""
    from gorila.reply import Done

    env_id = flaky_id("raise", 7)
    evaluation = PolicyEvaluation(env_id, unbuilt(env_id), greedy_policy, episodes=3, epsilon=0.0, seed=0,
                                  noop_max=0, every_s=0.0, target=5.0)
    first = {"eval_return": 5.0, "eval_min": 5.0, "eval_max": 5.0, "eval_version": 1, "eval_seed": 0,
             "eval_params": np.zeros(3, np.float32), "playing": False, "env_failures": 2,
             "evaluations_failed": 0, "pid": 100, "restarted": False}
    again = {**first, "eval_version": 2, "env_failures": 4}
    restarted = {"eval_failed": "the evaluation at version 3 failed: ...", "eval_version": 3, "playing": False,
                 "env_failures": 5, "evaluations_failed": 1, "pid": 200, "restarted": True}
    for report in (first, again, restarted):
        evaluation.pending = Done(dict(report))
        evaluation.after_chunk()
    assert evaluation.restarts == 1
    assert evaluation.summary()["eval_env_failures"] == 9 and evaluation.summary()["evaluations_failed"] == 1


def test_with_every_steps_an_evaluation_starts_at_each_multiple_of_the_steps_and_not_by_the_clock():
    from gorila.reply import Done

    evaluation = PolicyEvaluation("CartPole-v1", unbuilt("CartPole-v1"), greedy_policy, episodes=1, epsilon=0.0,
                                  seed=0, noop_max=0, every_s=0.0, target=None, every_steps=1000)
    started: list[bool | int] = []

    class Group(GroupStandIn):
        def start_steps(self, n, seconds=None):
            started.append(True)
            return [Done({"playing": False})]

    evaluation.group = Group()
    for steps in (0, 400, 999, 1000, 1500, 2600, 2700):
        evaluation.before_chunk({"env_steps": steps, "train_time_s": 0.0})
        evaluation.after_chunk()
        started.append(steps)
    # started at 0, at 1000 (the first at or past 1000) and at 2600 (past 2000): never by the clock
    assert [started[i + 1] for i, x in enumerate(started) if x is True] == [0, 1000, 2600]


def test_an_evaluation_is_placed_where_the_run_was_when_the_evaluator_took_its_parameters():
    """The first evaluation's parameters are pulled once the evaluator's process is up, chunks after
    it was asked for: it is placed at the last chunk begun by then, not where it was asked for."""
    import time

    from gorila.reply import Done

    evaluation = PolicyEvaluation("CartPole-v1", unbuilt("CartPole-v1"), greedy_policy, episodes=1, epsilon=0.0,
                                  seed=0, noop_max=0, every_s=0.0, target=None)
    report = {"eval_return": 9.0, "eval_min": 9.0, "eval_max": 9.0, "eval_version": 7, "eval_seed": 0,
              "eval_params": np.zeros(3, np.float32), "playing": False}
    waiting = []

    class Group(GroupStandIn):
        def start_steps(self, n, seconds=None):
            waiting.append(True)
            return [Waiting()]

    class Waiting(ReplyStandIn):
        def ready(self):
            return False

    evaluation.group = Group()
    evaluation.before_chunk({"env_steps": 100, "train_time_s": 1.0})   # asked for here
    assert waiting and evaluation.after_chunk() is None
    evaluation.before_chunk({"env_steps": 900, "train_time_s": 4.0})   # the evaluator's process starting
    taken_at = time.time()                                              # it pulls now
    evaluation.before_chunk({"env_steps": 1300, "train_time_s": 5.0})
    evaluation.pending = Done({**report, "eval_taken_at": taken_at})
    score = evaluation.after_chunk()
    assert score is not None
    assert score.at == {"env_steps": 900, "train_time_s": 4.0}
    assert score.row["eval_env_steps"] == 900 and "eval_taken_at" not in score.record
