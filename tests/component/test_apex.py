"""Ape-X on the local runtime: actors with their own ε fill prioritized replay, the learner samples
it by priority, sends priorities back, and the rate limiter holds samples per insert to its ratio."""

import pytest

from gorila.agents.apex.builder import make_plan
from gorila.agents.apex.config import ApexConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig
from gorila.driver.loop import run
from gorila.errors import ConfigError

ENV = "gorila/Counting-v0"   # observation = step index in a 5-step episode


def apex(tmp_path, steps=4000, param_cache="none", **overrides):
    cfg = ApexConfig(**{"actors": 2, "envs_per_actor": 2, "learning_starts": 200, "batch_size": 16, "prefetch": 2,
                        "replay_capacity": 2000, "hidden": (8,), "add_every": 4, **overrides})
    run_config = RunConfig(algo="apex", runtime="local", run_dir=tmp_path)
    return run(run_config, make_plan(run_config, cfg, RLConfig(env=ENV, total_steps=steps, eval_every_s=60,
                                                               param_cache=param_cache,
                                                               eval_episodes=1, stop_at_target=False)))


def test_the_learner_trains_on_prioritized_n_step_rows_and_reports_its_waits_and_lag(tmp_path):
    summary = apex(tmp_path)
    assert summary["workers"] == {"actor": 2, "learner": 1}
    assert summary["updates"] > 50
    # every env step becomes one row, but for those still in an n-step window (3 steps x 4 envs at most)
    assert 0 <= summary["env_steps"] - summary["replay_added"] < 3 * 4
    # rows are requested two minibatches at a time; at the end the learner may hold the unused half of
    # the request in use and two more requests in flight (the next ones are asked for as one is taken)
    assert 0 <= summary["replay_sampled"] - summary["updates"] * 16 <= (1 + 2 * 2) * 16
    assert summary["replay_priority_max"] > 0 and 0 <= summary["learner_wait_fraction"] < 1
    lag = {int(k): v for k, v in summary["learner_policy_lag_histogram"].items()}
    assert all(k == 0 or k & (k - 1) == 0 for k in lag)  # bins are 0 and powers of two
    assert sum(lag.values()) == summary["updates"] * 16


@pytest.mark.parametrize("ratio", [2.0, 6.0])
def test_the_rate_limiter_holds_samples_per_insert_near_the_ratio(tmp_path, ratio):
    # Without a limiter this run samples 1.66 rows per inserted row: within 15 % of each ratio
    # only when the limiter holds one side back.
    summary = apex(tmp_path, steps=6000, samples_per_insert=ratio)
    achieved = summary["replay_sampled"] / summary["replay_added"]
    assert abs(achieved / ratio - 1) < 0.15, achieved


def test_more_replay_shards_than_actors_is_refused():
    with pytest.raises(ConfigError, match="replay_shards"):
        ApexConfig(actors=2, replay_shards=3)


def test_with_a_node_cache_the_actors_read_the_cache_and_the_server_sees_one_pull_per_version(tmp_path):
    summary = apex(tmp_path, param_cache="node", replay_placement="node")
    assert summary["updates"] > 50
    # each actor read each of its refreshes from the cache, never from the server
    assert summary["actor_cache_reads"] > 0 and summary["actor_server_reads"] == 0
    # the cache pulled at most once per server version: one node, one pull per version
    assert 0 < summary["param_cache_pulls"] <= summary["updates"] + 1
    # A read's staleness is how many versions the cache had seen beyond the one read. The cache
    # writes a version before its heartbeat says it saw it, so a read is behind only when a refresh
    # lands between the actor's read of the vector and its look at the header (here a thread switch
    # within a few bytecodes): it is 0 nearly always, and never a whole version per read on average.
    assert summary["actor_param_staleness_mean"] < 1
