"""Ape-X on real Ray: actors, prioritized replay shards and a learner in their own processes; a
replay shard killed mid-run comes back from its checkpoint and the run goes on."""

import json

import pytest

from gorila.agents.apex.config import ApexConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

CFG = dict(actors=2, envs_per_actor=4, replay_shards=2, learning_starts=400, batch_size=32, replay_capacity=5000,
           samples_per_insert=4.0)


@pytest.mark.heavy
def test_apex_runs_its_actors_replay_shards_and_learner_as_ray_workers(ray_local, tmp_path, train):
    summary = train(RunConfig(algo="apex", runtime="ray", run_dir=tmp_path, call_timeout_s=60.0),
                    ApexConfig(**CFG), RLConfig(env="CartPole-v1", total_steps=6000, eval_episodes=2,
                                                target_return=1e9))
    assert summary["workers"] == {"actor": 2, "learner": 1} and summary["stop_reason"] == "budget"
    assert summary["updates"] > 0 and summary["worker_restarts"] == summary["service_restarts"] == 0
    # the rate limiter keeps sampled rows near 4 per inserted row, whichever side is faster
    assert 2.0 < summary["replay_sampled"] / summary["replay_added"] < 6.0
    # every minibatch the learner used came back from a replay shard in another process, and
    # waiting for the first one took some time: a fraction of its time, above 0 and below 1
    assert summary["learner_policy_lag_histogram"] and 0 < summary["learner_wait_fraction"] < 1
    assert json.loads((tmp_path / "config.json").read_text())["apex"]["n_step"] == 3
    # the replay shards' processes count their CPU time beside the workers'
    cpu = summary["cpu_s_by_process_kind"]
    assert cpu["replay"] > 0 and summary["cpu_time_s"] == pytest.approx(sum(cpu.values()))


@pytest.mark.heavy
def test_a_killed_replay_shard_comes_back_from_its_checkpoint_and_the_run_finishes(ray_local, tmp_path, train):
    killed = []

    def kill_once(placed):
        sizes = [s["size"] for s in placed.services["replay"].call("stats")]
        if not killed and (tmp_path / "checkpoints" / "replay-shard0").is_dir() and min(sizes) > 500:
            killed.append(sizes[0])
            placed.services["replay"].kill(0)

    run = RunConfig(algo="apex", runtime="ray", run_dir=tmp_path, call_timeout_s=60.0, checkpoint_every_s=0.5)
    summary = train(run, ApexConfig(**CFG, checkpoint_replay=True),
                    RLConfig(env="CartPole-v1", total_steps=15_000, eval_episodes=2, target_return=1e9),
                    on_chunk=kill_once)
    assert killed, "the run ended before a replay checkpoint existed"
    assert summary["stop_reason"] == "budget" and summary["env_steps"] >= 15_000
    assert summary["service_restarts"] == 1
    assert 0 <= summary["items_lost"] < killed[0]  # it came back from a checkpoint, not empty
