"""--normalize-obs and --normalize-reward end to end on the local runtime: the run's merged
statistics, their resume, and the saved policy playing through them."""

import glob

import gymnasium as gym
import numpy as np
import pytest
import safetensors.numpy

import gorila
from gorila.envs.evaluation import evaluate
from gorila.nets.actor_critic_env import greedy_policy
from tests.component.test_exact_resume import A3C, _evaluations, _interrupted_and_resumed, _work
from tests.evaluation_fakes import registered

PENDULUM = dict(runtime="local", env="Pendulum-v1", seed=1, actors=2, envs_per_actor=2, unroll_length=32,
                minibatches=2, epochs=2, eval_episodes=2, stop_at_target=False, normalize_obs=True,
                normalize_reward=True, checkpoint_every_s=1000.0)


def _last_arrays(run_dir):
    newest = sorted(glob.glob(str(run_dir / "checkpoints" / "ckpt-*[0-9].safetensors")))[-1]
    return safetensors.numpy.load_file(newest)


def _stop_after(rows):
    seen = []

    def callback(row):
        seen.append(row)
        return len(seen) < rows
    return callback


def test_a_pendulum_run_merges_every_actors_observations_and_returns(tmp_path):
    summary = gorila.train("ppo", run_dir=tmp_path / "run", total_steps=1_024, **PENDULUM)
    arrays = _last_arrays(tmp_path / "run")
    steps, first = summary["env_steps"], 2 * 2  # each env's first observation counts too
    assert int(arrays["normalize.obs.count"][0]) == steps + first  # both actors' every observation, once
    assert int(arrays["normalize.ret.count"][0]) == steps
    assert arrays["normalize.obs.mean"].shape == (3,)
    assert np.all(np.abs(arrays["normalize.obs.mean"][:2]) <= 1.0)  # cos and sin of the angle
    assert float(arrays["normalize.ret.mean"][0]) < 0  # Pendulum's rewards are costs
    # the reported returns are the raw rewards' (a Pendulum episode costs hundreds, not a few units)
    assert summary["evaluations"] and all(e["eval_return"] < -50 for e in summary["evaluations"])
    assert summary["final_train_return"] is None or summary["final_train_return"] < -50


def test_the_statistics_are_restored_on_resume(tmp_path):
    run_dir = tmp_path / "run"
    first = gorila.train("ppo", run_dir=run_dir, total_steps=2_048, callback=_stop_after(4), **PENDULUM)
    before = _last_arrays(run_dir)
    assert first["stop_reason"] == "callback"
    assert int(before["normalize.obs.count"][0]) == first["env_steps"] + 4
    resumed = gorila.train(resume=run_dir)
    after = _last_arrays(run_dir)
    # the resumed actors went on from their saved envs: every observation since was added to the saved statistics
    assert int(after["normalize.obs.count"][0]) == int(before["normalize.obs.count"][0]) + (
        resumed["env_steps"] - first["env_steps"])
    assert int(after["normalize.ret.count"][0]) == resumed["env_steps"]


class _Offset(gym.Env):
    """Observations 1000 + N(0, 1) noise; the reward is best for action 0.3 (a policy acting on the raw
    observations saturates its tanh layers and plays one action, whatever it sees)."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self):
        self.rng, self.t = np.random.default_rng(0), 0

    def _obs(self):
        return (1000.0 + self.rng.normal(size=2)).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), -float((action[0] - 0.3) ** 2), False, self.t >= 20, {}


def test_a_saved_policy_and_gorila_eval_play_through_the_saved_statistics(tmp_path):
    env_id = registered("Offset", _Offset)
    gorila.train("ppo", run_dir=tmp_path / "run", env=env_id, total_steps=640, runtime="local", seed=0, actors=1,
                 envs_per_actor=2, unroll_length=32, epochs=1, minibatches=1, eval_episodes=1,
                 stop_at_target=False, normalize_obs=True, checkpoint_every_s=1000.0)
    arrays = _last_arrays(tmp_path / "run")
    mean = arrays["normalize.obs.mean"]
    std = np.sqrt(arrays["normalize.obs.m2"] / arrays["normalize.obs.count"][0] + 1e-8)
    assert np.allclose(mean, 1000.0, atol=0.5) and np.all(std < 2.0)  # the statistics of what the actors saw

    policy = gorila.load_policy(tmp_path / "run", checkpoint="last")
    greedy = greedy_policy(policy.network)
    by_hand = lambda obs: greedy(np.clip((obs - mean) / std, -10, 10).astype(np.float32))  # noqa: E731
    obs = np.stack([_Offset()._obs() for _ in range(8)])
    np.testing.assert_allclose(policy(obs), by_hand(obs), atol=1e-5)
    assert not np.allclose(policy(obs), greedy(obs), atol=1e-3)  # the raw observations give other actions

    played = gorila.evaluate(tmp_path / "run", episodes=3, checkpoint="last", seed=5)
    assert played["scores"] == pytest.approx(evaluate(by_hand, env_id, 3, 0.0, seed=5))
    assert played["scores"] != pytest.approx(evaluate(greedy, env_id, 3, 0.0, seed=5))


@pytest.mark.heavy
def test_a_normalised_a3c_run_interrupted_and_resumed_logs_the_uninterrupted_runs_rows(tmp_path):
    settings = {**A3C, "env": "Pendulum-v1", "normalize_obs": True, "normalize_reward": True,
                "checkpoint_every_s": 1e-3}
    whole, (resumed,) = _interrupted_and_resumed("a3c", settings, tmp_path, rows=[4])
    assert len(_evaluations(whole)) >= 4
    assert _work(resumed) == _work(whole)
