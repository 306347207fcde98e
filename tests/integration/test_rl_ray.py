"""DQN and A3C on real Ray under the synchronous and semi-asynchronous rules, on tiny budgets."""

import pytest

from gorila.agents.a3c.config import A3CConfig
from gorila.agents.dqn.config import DQNConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

RL = RLConfig(env="CartPole-v1", total_steps=2000, stop_at_target=False, eval_episodes=2)
SEMI = dict(aggregate=2, count_within=1, accept_within=2)


@pytest.mark.parametrize("algo, cfg", [pytest.param("dqn", DQNConfig(actors=2, learning_starts=100),
                                                   marks=pytest.mark.heavy), ("a3c", A3CConfig())])
@pytest.mark.parametrize("mode", ["sync", pytest.param("semi-async", marks=pytest.mark.heavy)])
def test_rl_algorithms_train_on_ray(ray_local, tmp_path, train, algo, cfg, mode):
    run = RunConfig(algo=algo, mode=mode, runtime="ray", run_dir=tmp_path, **(SEMI if mode == "semi-async" else {}))
    summary = train(run, cfg, RL)
    assert summary["env_steps"] >= 2000 and summary["updates"] > 0 and summary["stop_reason"] == "budget"
    assert summary["worker_restarts"] == 0 and summary["pushes_rejected_nonfinite"] == 0
    staleness = {int(s): n for s, n in summary["staleness_histogram"].items()}
    if mode == "sync":  # two workers (bundles) per update, every push counted, never stale
        assert summary["pushes_counted"] == 2 * summary["updates"] and summary["pushes_rejected"] == 0
        assert set(staleness) == {0}
    else:  # staleness <= 1 counts, 2 joins, more is rejected: exactly the pushes the histogram shows
        assert summary["pushes_counted"] == sum(n for s, n in staleness.items() if s <= 1)
        assert summary["pushes_accepted"] == staleness.get(2, 0)
        assert summary["pushes_rejected_stale"] == sum(n for s, n in staleness.items() if s > 2)
    assert summary["eval_epsilon"] == {"dqn": 0.05, "a3c": 0.0}[algo]
    # the run's end on Ray, stage by stage in order: the summary written before the processes are stopped
    stamps = list(summary["shutdown"].values())
    assert "runtime_stopped_s" in summary["shutdown"] and stamps == sorted(stamps) and summary["shutdown_s"] >= 0


@pytest.mark.heavy
def test_a3c_workers_on_ray_read_the_node_cache_and_no_push_brings_parameters(ray_local, tmp_path, train):
    # sync: each reply comes after the barrier, and the next read waits for the cache to hold that version
    run = RunConfig(algo="a3c", mode="sync", runtime="ray", run_dir=tmp_path)
    summary = train(run, A3CConfig(), RLConfig(env="CartPole-v1", total_steps=2000, stop_at_target=False,
                                               eval_episodes=2, param_cache="node"))
    assert summary["updates"] > 0 and summary["worker_cache_reads"] > 0 and summary["worker_server_reads"] == 0
    pushes = summary["pushes_counted"] + summary["pushes_accepted"] + summary["pushes_rejected"]
    vector_bytes = summary["bytes_pushed"] // pushes  # a gradient weighs what the parameters weigh
    # every byte the server sent was a whole read (the cache's), none a push's reply
    assert summary["bytes_pulled"] == summary["server_pulls"] * vector_bytes
