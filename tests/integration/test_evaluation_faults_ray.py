"""Issue 32, item 1, on Ray: an env that raises inside the evaluator's process is rebuilt and its
episode dropped and counted; the evaluation completes and nothing fails (it used to end the run)."""

import functools

import pytest

from gorila.driver.policy_evaluation import PolicyEvaluation
from gorila.nets import FlatParams
from gorila.nets.q import build_q_network, greedy_policy
from gorila.params import ServerSpec, UpdateRule

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ENV = "gorila/Flaky-v0"  # 5 steps of reward 1 per episode; every 7th step of the process raises


@pytest.fixture
def evaluation(ray_local):
    """A PolicyEvaluation of the flaky env on a Ray runtime, started (its evaluator starts with the first chunk)."""
    from gorila.runtime.ray_runtime import RayRuntime

    runtime = RayRuntime(call_timeout_s=120)
    runtime.plan(2)
    try:
        network_fn = functools.partial(build_q_network, ENV, (8,), 0)
        shards = runtime.start_shards(ServerSpec(rule=UpdateRule.asynchronous()), FlatParams(network_fn()).get())
        evaluation = PolicyEvaluation(ENV, network_fn, greedy_policy, episodes=3, epsilon=0.0, seed=0, noop_max=0,
                                      every_s=0.0, target=5.0)
        evaluation.start(runtime, shards, {})
        yield evaluation
    finally:
        runtime.shutdown()


def test_an_env_that_raises_in_the_ray_evaluator_is_rebuilt_and_counted(evaluation):
    evaluation.before_chunk({"env_steps": 0, "train_time_s": 0.0})
    score = evaluation.finish()
    assert score.value == 5.0 and score.reached  # dropped episodes were played again, whole
    assert score.row["eval_env_failures"] >= 2  # the evaluator's 7th and 14th steps at least
    assert evaluation.summary()["eval_env_failures"] == score.row["eval_env_failures"]
    assert evaluation.summary()["evaluations_failed"] == 0


def test_a_killed_evaluator_is_restarted_and_counted_among_worker_restarts(evaluation):
    """Issue 32, item 9: Ray restarts an evaluator whose process dies; the next evaluation comes
    from a new process, which the evaluation counts as a restart (the run adds it to
    ``worker_restarts``), keeping the env failures counted before."""
    import os
    import signal

    evaluation.before_chunk({"env_steps": 0, "train_time_s": 0.0})
    first = evaluation.finish()
    failures_before = evaluation.env_failures
    os.kill(first.record["pid"], signal.SIGKILL)
    evaluation.before_chunk({"env_steps": 0, "train_time_s": 0.0})
    second = evaluation.finish()
    assert second.record["pid"] != first.record["pid"] and second.value == 5.0
    assert evaluation.restarts == 1
    assert evaluation.env_failures >= failures_before + 1  # the new process's failures add to the old's
