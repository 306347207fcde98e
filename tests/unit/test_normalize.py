"""Running normalisation (gorila.envs.normalize): Chan's merge, the clip, the runner an actor steps,
the statistics' round trip through reports and checkpoint arrays, and the driver's merge."""

import functools
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from gorila.agents.registry import ALGORITHMS
from gorila.agents.rl_config import RLConfig
from gorila.driver.normalization import RunStatistics
from gorila.envs.normalize import (
    CLIP,
    Normalization,
    NormalizedPolicy,
    NormalizedRunner,
    Normalizer,
    RunningStats,
    Statistics,
)
from gorila.envs.vector import EnvRunner, GymnasiumBackend
from gorila.errors import CheckpointError, ConfigError
from role_fakes import GroupStandIn


def test_chan_merge_of_two_halves_is_the_statistics_of_the_whole():
    rng = np.random.default_rng(0)
    data = rng.normal(5.0, 3.0, size=(1001, 4))
    first, second = RunningStats.empty((4,)), RunningStats.empty((4,))
    for chunk in np.array_split(data[:400], 7):  # uneven batches, one of them merged into the other
        first.update(chunk)
    second.update(data[400:])
    first.merge(second)
    assert first.count == 1001
    np.testing.assert_allclose(first.mean, data.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(first.var, data.var(axis=0), rtol=1e-10)


def test_a_stream_of_single_rows_and_empty_batches_adds_up_to_the_whole():
    data = np.random.default_rng(1).normal(-2.0, 0.5, size=(300, 3))
    stats = RunningStats.empty((3,))
    for row in data:  # an actor of one env adds one row a step
        stats.update(row[None])
        stats.update(data[:0])
    assert stats.count == 300
    np.testing.assert_allclose(stats.mean, data.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(stats.var, data.var(axis=0), rtol=1e-10)
    row = data[:1].copy()
    one = RunningStats.of(row)
    row[:] = 0.0  # runners reuse their arrays: a row's statistics must not change with them
    np.testing.assert_array_equal(one.mean, data[0])


def test_normalisation_is_by_mean_and_std_and_clipped_to_ten():
    stats = RunningStats.empty((2,))
    stats.update(np.array([[0.0, 10.0], [2.0, 10.0]]))  # mean (1, 10), var (1, 0)
    out = stats.normalize(np.array([[3.0, 10.0], [1.0e6, 10.0 + 1e-3]]))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out[0], [2.0, 0.0], atol=1e-6)
    assert out[1, 0] == CLIP and out[1, 1] == CLIP  # a huge value, and a deviation over a zero variance
    assert stats.normalize(np.array([[-1.0e6, 10.0]]))[0, 0] == -CLIP


class _Constant(gym.Env):
    """Observations 1000 + step count; reward 2 a step; ends after ``length`` steps."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length=3):
        self.length, self.t = length, 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.array([1000.0, 0.0]), {}

    def step(self, action):
        self.t += 1
        return np.array([1000.0, float(self.t)]), 2.0, self.t >= self.length, False, {}


def _runner(spec, num_envs=2):
    runner = EnvRunner(GymnasiumBackend([functools.partial(_Constant) for _ in range(num_envs)]))
    normalizer = Normalizer(spec, runner.observation_space)
    return NormalizedRunner(runner, normalizer), normalizer


def test_the_runner_hands_out_what_the_network_saw_and_scales_rewards_by_the_returns_spread():
    runner, normalizer = _runner(Normalization(obs=True, reward=True, gamma=0.5))
    assert runner.observation_space.dtype == np.float32 and runner.observation_space.shape == (2,)
    seen = runner.observations.copy()
    t = runner.step(np.zeros(2, np.int64))
    np.testing.assert_array_equal(t.obs, seen)  # stored as acted on
    assert np.abs(t.obs).max() <= CLIP and np.abs(t.next_obs[:, 0]).max() < 1.0  # 1000 is the mean, not a value
    # returns so far: 2 in each env; the reward divided by their std (0 -> 1e-8: clipped)
    assert np.all(t.reward == CLIP)
    runner.step(np.zeros(2, np.int64))
    t = runner.step(np.zeros(2, np.int64))   # returns 2, 3, 3.5: the third step scaled by their std
    returns = np.array([2.0, 2.0, 3.0, 3.0, 3.5, 3.5])
    np.testing.assert_allclose(t.reward, 2.0 / np.sqrt(returns.var() + 1e-8), rtol=1e-5)
    assert [e.score for e in runner.pop_episodes()] == [6.0, 6.0]  # the raw rewards'
    assert runner.returns.tolist() == [0.0, 0.0]  # reset at the episodes' end


def test_a_workers_report_carries_its_growth_once_and_the_driver_merges_reports_into_the_whole():
    runner_a, a = _runner(Normalization(obs=True, reward=False, gamma=0.99))
    runner_b, b = _runner(Normalization(obs=True, reward=False, gamma=0.99))
    for _ in range(4):
        runner_a.step(np.zeros(2, np.int64))
    runner_b.step(np.zeros(2, np.int64))
    driver = RunStatistics(("actor",))
    reports = [{"env_steps": 8, **a.report()}, {"env_steps": 2, **b.report()}]
    driver.take("actor", reports)
    assert reports == [{"env_steps": 8}, {"env_steps": 2}]  # the parts are taken out of the reports
    # a: the first observations and 4 steps of 2 envs; b: the first and 1 step
    merged = driver.statistics.obs
    assert merged is not None and merged.count == 5 * 2 + 2 * 2 and driver.statistics.ret is None
    assert a.report()["normalization"]["obs"]["count"] == 0  # nothing new since the last report

    class Actors(GroupStandIn):  # a worker group whose actors' normalize_with loads their normalisers
        def call(self, method, *args):
            assert method == "normalize_with"
            return [normalizer.load(*args) for normalizer in (a, b)]

    driver.hand_back("learner", Actors())  # a group that does not normalise is handed nothing
    assert a.current.obs.count == 5 * 2
    driver.hand_back("actor", Actors())
    np.testing.assert_array_equal(a.current.obs.mean, b.current.obs.mean)  # every actor normalises alike
    assert driver.statistics.obs is not None
    np.testing.assert_allclose(a.current.obs.mean, driver.statistics.obs.mean)


def test_statistics_survive_checkpoint_arrays_and_damaged_ones_are_refused():
    stats = Statistics(RunningStats(5, np.array([1.0, 2.0]), np.array([3.0, 4.0])),
                       RunningStats(7, np.asarray(1.5), np.asarray(2.5)))
    back = Statistics.from_arrays({k: v.copy() for k, v in stats.arrays().items()})
    assert back.obs is not None and back.ret is not None
    assert back.obs.count == 5 and back.obs.mean.tolist() == [1.0, 2.0] and back.obs.m2.tolist() == [3.0, 4.0]
    assert back.ret.count == 7 and back.ret.mean.shape == () and float(back.ret.m2) == 2.5
    assert Statistics.from_arrays({}).obs is None
    damaged = {**stats.arrays(), "normalize.obs.m2": np.array([3.0, np.nan])}
    with pytest.raises(CheckpointError, match="obs normalisation statistics are damaged"):
        Statistics.from_arrays(damaged)
    partial = {k: v for k, v in stats.arrays().items() if k != "normalize.ret.m2"}
    with pytest.raises(CheckpointError, match="normalize.ret.m2"):
        Statistics.from_arrays(partial)


def test_a_normalised_policy_sees_the_frozen_statistics_normalised_observations():
    stats = RunningStats(2, np.array([1000.0]), np.array([2.0]))  # mean 1000, var 1
    seen = []

    def acts(obs):
        seen.append(obs)
        return np.zeros(len(obs))

    policy = NormalizedPolicy(acts, stats)
    policy(np.array([[1001.0], [999.0]]))
    np.testing.assert_allclose(seen[0], [[1.0], [-1.0]], atol=1e-6)
    assert stats.count == 2  # nothing added at evaluation


def test_image_observations_and_other_algorithms_are_refused_by_field():
    frames = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
    with pytest.raises(ConfigError) as err:
        RLConfig(env="ALE/Pong-v5", normalize_obs=True).normalization(frames, 0.99)
    assert err.value.field == "normalize_obs"
    assert RLConfig(normalize_reward=True).normalization(frames, 0.99) == Normalization(False, True, 0.99)
    assert RLConfig().normalization(gym.spaces.Box(-1, 1, (3,)), 0.99) is None
    for algo, field in (("dqn", "normalize_obs"), ("apex", "normalize_reward")):
        flag: dict[str, Any] = {field: True}
        configs = [cls() for cls in ALGORITHMS[algo].config_classes()[:-1]] + [RLConfig(**flag)]
        with pytest.raises(ConfigError) as err:
            ALGORITHMS[algo].check(configs)
        assert err.value.field == field
