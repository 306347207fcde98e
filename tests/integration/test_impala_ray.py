"""IMPALA on real Ray: actors, trajectory queues and learners in their own processes, on a tiny budget."""

import pytest

from gorila.agents.impala.config import ImpalaConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

RL = RLConfig(env="CartPole-v1", total_steps=3000, stop_at_target=False, eval_episodes=2)


@pytest.mark.heavy  # impala on Ray, sync and async; ppo below stays in make test
@pytest.mark.parametrize("mode, learners", [("sync", 1), ("async", 2)])
def test_impala_trains_on_ray(ray_local, tmp_path, train, mode, learners):
    run = RunConfig(algo="impala", mode=mode, runtime="ray", run_dir=tmp_path)
    summary = train(run, ImpalaConfig(learners=learners), RL)
    assert summary["env_steps"] >= 3000 and summary["updates"] > 0 and summary["stop_reason"] == "budget"
    assert summary["worker_restarts"] == 0 and summary["pushes_rejected_nonfinite"] == 0
    assert summary["workers"] == {"actor": 2, "learner": learners}
    # every gradient is one 20-step segment of 8 envs, and every push is an update of its own
    lag = {int(k): v for k, v in summary["learner_policy_lag_histogram"].items()}
    assert sum(lag.values()) == summary["pushes_counted"] * 20 * 8 and summary["updates"] == summary["pushes_counted"]


@pytest.mark.heavy
def test_ppo_trains_on_ray(ray_local, tmp_path, train):
    from gorila.agents.ppo.config import PPOConfig

    run = RunConfig(algo="ppo", mode="sync", runtime="ray", run_dir=tmp_path)
    summary = train(run, PPOConfig(epochs=2, minibatches=2), RL)
    assert summary["env_steps"] >= 3000 and summary["stop_reason"] == "budget"
    assert summary["updates"] > 0 and summary["updates"] % 4 == 0  # 2 epochs x 2 minibatches per batch
    # Classic synchronous PPO: the actors wait for each round's updates, so every batch, the first
    # included, was acted on the learner's own version (actors running ahead would lag whole batches).
    lag = {int(k): v for k, v in summary["learner_policy_lag_histogram"].items()}
    assert summary["learner_policy_lag_mean"] == 0 and set(lag) == {0} and lag[0] > 0
