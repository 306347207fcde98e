"""On the local runtime the evaluator shares the driver's process: it plays in slices between the
training chunks instead of holding training up for a whole evaluation (Atari: many seconds)."""

import functools
import itertools

from gorila.driver.policy_evaluation import IN_PROCESS_SHARE, PolicyEvaluation
from gorila.nets import FlatParams
from gorila.nets.q import build_q_network, greedy_policy
from gorila.params import ServerSpec, UpdateRule
from gorila.runtime import LocalRuntime

ENV = "gorila/Counting-v0"  # every episode lasts 5 steps and returns 5.0


def _evaluation(every_s: float) -> PolicyEvaluation:
    """An evaluation whose evaluator's every slice ends after one env step."""
    network_fn = functools.partial(build_q_network, ENV, (8,), 0)
    runtime = LocalRuntime()
    shards = runtime.start_shards(ServerSpec(rule=UpdateRule.asynchronous()), FlatParams(network_fn()).get())
    evaluation = PolicyEvaluation(ENV, network_fn, greedy_policy, episodes=4, epsilon=0.0, seed=0, noop_max=0,
                                  every_s=every_s, target=5.0)
    ticks = itertools.count()
    evaluation.factory = functools.partial(evaluation.factory, clock=lambda: next(ticks))
    evaluation.start(runtime, shards, {})
    return evaluation


def test_an_evaluation_spans_several_chunks_and_scores_once_complete():
    evaluation = _evaluation(every_s=1_000.0)  # a continued evaluation does not wait for every_s
    chunks = 0
    score = None
    while score is None and chunks < 40:
        evaluation.before_chunk({"env_steps": 0, "train_time_s": 0.0})
        chunks += 1
        evaluation.runtime.wait([], 10.0)  # a training chunk would run here: the driver waits on the runtime
        score = evaluation.after_chunk()
    assert chunks == 4 * 5  # one chunk after each env step of the 4 five-step episodes
    assert evaluation.group.workers[0].share == IN_PROCESS_SHARE
    assert score.value == 5.0 and score.reached
    assert evaluation.after_chunk() is None  # and only once


def test_finish_plays_the_evaluation_under_way_to_its_end():
    evaluation = _evaluation(every_s=0.0)
    evaluation.before_chunk({"env_steps": 0, "train_time_s": 0.0})
    evaluation.runtime.wait([], 10.0)
    assert evaluation.after_chunk() is None  # one env step of twenty played
    score = evaluation.finish()
    assert score.value == 5.0 and evaluation.summary()["final_eval_return"] == 5.0
