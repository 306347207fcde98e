"""Gorila DQN with a global replay on real Ray: 2 actors, 1 learner, 2 replay shards, CartPole."""

import json

import pytest

from gorila.algos.dqn.config import DQNConfig
from gorila.config import RunConfig
from gorila.driver.rl_config import RLConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def test_actors_learner_and_replay_shards_run_as_ray_workers(ray_local, tmp_path, train):
    dqn = DQNConfig(replay="global", replay_shards=2, actors=2, learners=1, learning_starts=500)
    summary = train(RunConfig(algo="dqn", runtime="ray", run_dir=tmp_path, call_timeout_s=60.0), dqn,
                    RLConfig(env="CartPole-v1", total_steps=3000, eval_episodes=2, target_return=1e9))
    assert summary["stop_reason"] == "budget" and summary["env_steps"] >= 3000
    assert summary["workers"] == {"actor": 2, "learner": 1}
    assert summary["updates"] == summary["pushes_counted"] > 0 and summary["pushes_rejected"] == 0
    assert summary["worker_restarts"] == 0
    assert json.loads((tmp_path / "config.json").read_text())["dqn"]["replay"] == "global"
