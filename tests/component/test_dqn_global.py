"""Gorila DQN with a global replay on the local runtime: actors fill replay shards, learners push."""

import numpy as np
import pytest

from gorila.agents.dqn.builder import make_plan
from gorila.agents.dqn.config import DQNConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig
from gorila.driver.loop import run
from gorila.errors import ConfigError
from gorila.params import merge_stats
from gorila.runtime import LocalRuntime

ENV = "gorila/Counting-v0"   # observation = step index in a 5-step episode


def cfg(**overrides) -> DQNConfig:
    return DQNConfig(**{"replay": "global", "replay_shards": 2, "actors": 2, "learners": 1,
                        "learning_starts": 150, "batch_size": 16, "hidden": (8,), "actor_refresh": 10, **overrides})


def start(mode: str, dqn: DQNConfig):
    """The plan's replay shards, actors and learners, placed the way the driver places them."""
    plan = make_plan(RunConfig(algo="dqn", mode=mode, runtime="local"), dqn, RLConfig(env=ENV))
    runtime = LocalRuntime()
    shards = runtime.start_shards(plan.spec, plan.initial_params())
    services = {s.name: runtime.start_services(s.factory, s.count, name=s.name) for s in plan.services}
    specs = plan.groups({name: group.endpoints() for name, group in services.items()})
    groups = {w.name: runtime.start_workers(w.factory, w.count, shards.server, name=w.name) for w in specs}
    return shards, services["replay"], groups["actor"], groups["learner"]


def test_transitions_reach_their_shard_and_the_learner_pushes_once_replay_is_ready():
    shards, replay, actors, learners = start("async", cfg())
    actors.run_steps(5)        # 2 x 42 transitions: below learning_starts, 75 per shard
    assert learners.run_steps(5)[0]["updates_pushed"] == 0
    assert merge_stats(shards.stats()).updates == 0
    for _ in range(4):
        actors.run_steps(5)
        learner, = learners.run_steps(5)
    shard_reports, actor_reports = replay.call("stats"), actors.call("report")
    # Actor k writes to shard k; every transition it took arrived once.
    assert [r["added"] for r in shard_reports] == [a["env_steps"] for a in actor_reports]
    # An actor has at most its last batch (actor_refresh = 10 env steps) unacknowledged.
    assert all(0 < a["env_steps"] - a["transitions_stored"] <= 10 for a in actor_reports)
    assert all(r["duplicates"] == 0 for r in shard_reports)
    for batch in replay.call("sample", 200):
        assert np.array_equal(batch.next_obs, batch.obs + 1) and set(batch.obs[:, 0]) == {0, 1, 2, 3, 4}
    # Learning starts in the second round; from then on one push per step, each applied once.
    assert learner["learning"] and learner["updates_pushed"] == 4 * 5
    stats = merge_stats(shards.stats())
    assert stats.updates == stats.pushes_counted == 20 and stats.pushes_rejected == 0
    # Prefetching alternates between the shards: while one batch is used, the next two are requested.
    assert sum(r["sampled"] for r in shard_reports) == 16 * (20 + 2)
    assert all(r["sampled"] > 0 for r in shard_reports)


def test_synchronous_learners_start_together_and_every_update_averages_both():
    shards, replay, actors, learners = start("sync", cfg(learners=2))
    for _ in range(5):
        actors.run_steps(5)
        reports = learners.run_steps(5)
    assert reports[0]["updates_pushed"] == reports[1]["updates_pushed"] > 0
    stats = merge_stats(shards.stats())
    assert stats.updates == reports[0]["updates_pushed"] and stats.pushes_counted == 2 * stats.updates


def test_a_global_run_on_the_driver_counts_env_steps_and_updates(tmp_path):
    run_config = RunConfig(algo="dqn", runtime="local", run_dir=tmp_path)
    summary = run(run_config, make_plan(run_config, cfg(), RLConfig(env=ENV, total_steps=3000, eval_every_s=60.0,
                                                                    eval_episodes=2)))
    assert summary["workers"] == {"actor": 2, "learner": 1}
    assert summary["stop_reason"] == "budget" and summary["env_steps"] >= 3000
    assert summary["updates"] == summary["pushes_counted"] > 0 and summary["pushes_rejected"] == 0
    assert (tmp_path / "summary.json").exists()


def test_more_replay_shards_than_actors_is_refused():
    with pytest.raises(ConfigError, match="replay_shards"):
        cfg(replay_shards=3)
