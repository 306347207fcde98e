"""Issue 44, item 7: bad values an env returns are judged the same in training and in evaluation
(one check, gorila.envs.faults.EnvCheck): observations of strings or NaN, and rewards that are
strings or arrays, are faults in both, never reach a policy and never crash the evaluator; finite
values past a float Box's declared bounds are the env's own (LunarLander-v3's heights) and reach
it; the action sent respects ``Discrete.start`` in both; an env whose ``close()`` raises is logged
and does not stop anything."""

import logging

import gymnasium as gym
import numpy as np
import pytest

from evaluation_fakes import Watching, made, registered
from gorila.envs.evaluation import EvaluationEpisodes
from gorila.envs.fake import CountingEnv, FlakyEnv
from gorila.envs.make import env_spaces
from gorila.envs.vector import EnvRunner, GymnasiumBackend
from gorila.errors import EnvFailedError

BAD_VALUES = ["str_obs", "array_reward", "str_reward", "nan_obs"]


@pytest.fixture(autouse=True)
def _count_from_zero():
    FlakyEnv.steps_in_process = 0


def _clean(obs: np.ndarray) -> bool:
    """Numbers within CountingEnv's Box (0..inf), as a network may read them."""
    return obs.dtype == np.float32 and bool(np.isfinite(obs).all()) and bool((obs >= 0).all())


@pytest.mark.parametrize("how", BAD_VALUES)
def test_a_bad_value_in_training_is_a_fault_and_never_reaches_a_transition(how):
    runner = EnvRunner(GymnasiumBackend([lambda: FlakyEnv(fail_every=7, how=how)], f"Flaky-{how}"))
    rows = [runner.step(np.zeros(1, np.int64)) for _ in range(20)]
    assert runner.env_failures >= 2
    assert all(_clean(t.obs) and _clean(t.next_obs) and t.reward.dtype == np.float32 for t in rows)
    assert [float(r) for t in rows for r in t.reward] == [1.0] * sum(len(t) for t in rows)


@pytest.mark.parametrize("how", BAD_VALUES)
def test_a_bad_value_in_evaluation_is_the_same_fault_its_episode_played_again(how):
    played = EvaluationEpisodes(registered(f"Flaky-{how}", FlakyEnv, how=how, fail_every=7), episodes=3,
                                epsilon=0.0, seed=0, noop_max=0)
    policy = Watching()
    try:
        assert played.play(policy)
    finally:
        played.close()
    assert played.returns == [5.0, 5.0, 5.0]  # the dropped episodes' partial returns are not kept
    assert played.failures.count >= 2 and played.failures.last is not None and "Flaky" in played.failures.last
    assert all(_clean(np.asarray(obs, np.float32)) and np.asarray(obs).dtype.kind == "f" for obs in policy.seen)


def test_finite_values_past_a_float_box_bounds_are_no_fault_in_training_or_evaluation():
    """Gymnasium's LunarLander-v3 reports heights past its Box's 2.5 whenever the lander climbs."""
    runner = EnvRunner(GymnasiumBackend([lambda: FlakyEnv(fail_every=3, how="out_of_box")], "Flaky-out_of_box"))
    rows = [runner.step(np.zeros(1, np.int64)) for _ in range(6)]
    assert runner.env_failures == 0 and -1.0 in [float(x) for t in rows for x in t.next_obs.ravel()]
    played = EvaluationEpisodes(registered("Flaky-out_of_box-3-eval", FlakyEnv, how="out_of_box", fail_every=3),
                                episodes=2, epsilon=0.0, seed=0, noop_max=0)
    try:
        assert played.play(Watching())
    finally:
        played.close()
    assert played.failures.count == 0 and len(played.returns) == 2


def test_both_paths_name_the_same_fault_for_the_same_value():
    training = EnvRunner(GymnasiumBackend([lambda: FlakyEnv(fail_every=3, how="nan_obs")], "same-id"))
    for _ in range(3):
        training.step(np.zeros(1, np.int64))
    evaluation = EvaluationEpisodes(registered("Flaky-nan_obs-3", FlakyEnv, how="nan_obs", fail_every=3),
                                    episodes=1, epsilon=0.0, seed=0, noop_max=0)
    try:
        with pytest.raises(EnvFailedError):  # every episode fails at its third step: the evaluation fails
            evaluation.play(Watching())
    finally:
        evaluation.close()
    trained, evaluated = training.backend.failures.last, evaluation.failures.last
    assert trained is not None and evaluated is not None
    said = trained.split(" env 0 ")[1], evaluated.split(" env 0 ")[1]
    assert said[0] == said[1] and "NaN or infinity" in said[0]


def test_discrete_start_is_added_to_the_action_sent_in_training():
    envs = [CountingEnv(action_start=1), CountingEnv(action_start=1)]
    runner = EnvRunner(GymnasiumBackend([made(e) for e in envs], "Start1"))
    t = runner.step(np.array([0, 1]))
    assert runner.env_failures == 0 and list(t.action) == [0, 1]  # transitions keep the policy's indices
    assert [env.actions_taken for env in envs] == [[1], [2]]


def test_discrete_start_is_added_to_the_action_sent_in_evaluation():
    env_id = registered("Start1", CountingEnv, action_start=1)
    played = EvaluationEpisodes(env_id, episodes=2, epsilon=0.5, seed=0, noop_max=3)
    try:
        assert played.play(lambda obs: np.ones(len(obs), np.int64))
        taken: list[int] = []
        for env in played.envs:
            assert isinstance(env.unwrapped, CountingEnv)
            taken += env.unwrapped.actions_taken
    finally:
        played.close()
    assert played.failures.count == 0 and played.returns == [5.0, 5.0]
    assert set(taken) <= {1, 2} and 1 in taken  # the no-op (index 0) is the env's action 1


def test_an_env_whose_close_raises_is_logged_and_stops_nothing(caplog):
    env_id = registered("CloseRaises", CountingEnv, close_raises=True)
    with caplog.at_level(logging.WARNING, logger="gorila.envs.make"):
        observation_space, _ = env_spaces(env_id)  # what a plan reads before training starts
        backend = GymnasiumBackend([lambda: gym.make(env_id)], env_id)
        backend.close()
        played = EvaluationEpisodes(env_id, episodes=1, epsilon=0.0, seed=0, noop_max=0)
        played.play(Watching())
        played.close()
    assert observation_space.shape == (1,)
    assert "emulator lost while closing" in caplog.text and "ignored" in caplog.text
