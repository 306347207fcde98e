"""With ``--param-cache node`` the actors of IMPALA and PPO read the parameters through their
node's cache: the server is read once per version by the cache, not once per actor's refresh."""

import pytest

from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig
from gorila.driver.loop import run

ACTORS = 6


def _summary(tmp_path, algo: str, param_cache: str) -> dict:
    from gorila.agents.registry import ALGORITHMS

    run_config = RunConfig(algo=algo, runtime="local", mode="async", seed=0, run_dir=tmp_path / param_cache)
    cfg_class = ALGORITHMS[algo].config_classes()[0]
    cfg = cfg_class(actors=ACTORS, envs_per_actor=2, unroll_length=8, hidden=(8,))
    rl = RLConfig(total_steps=2000, eval_every_s=600, eval_episodes=1, stop_at_target=False, param_cache=param_cache)
    return run(run_config, ALGORITHMS[algo].plan_fn()(run_config, cfg, rl))


@pytest.mark.parametrize("algo", ["ppo", "impala"])
def test_the_actors_read_through_the_node_cache(tmp_path, algo):
    cached = _summary(tmp_path, algo, "node")
    # every actor's every refresh came from the cache (the report averages over the actors)
    assert cached["actor_cache_reads"] > 0 and cached["actor_server_reads"] == 0
    reads = ACTORS * cached["actor_cache_reads"]
    assert cached["param_cache_pulls"] <= cached["updates"] + 1  # at most one pull per version
    assert cached["server_pulls"] < reads  # the server saw fewer reads than the actors made

    direct = _summary(tmp_path, algo, "none")
    assert "actor_cache_reads" not in direct
    # the same run without the cache: every actor's refresh is a read of the server
    assert cached["server_pulls"] < direct["server_pulls"]


def test_a3c_workers_read_the_node_cache_and_their_pushes_bring_no_parameters(tmp_path):
    from gorila.agents.a3c.builder import make_plan
    from gorila.agents.a3c.config import A3CConfig

    def summary(param_cache: str) -> tuple[dict, int]:
        run_config = RunConfig(algo="a3c", runtime="local", mode="async", seed=0, run_dir=tmp_path / param_cache)
        rl = RLConfig(total_steps=2000, eval_every_s=600, eval_episodes=1, stop_at_target=False,
                      param_cache=param_cache)
        plan = make_plan(run_config, A3CConfig(workers=4, envs_per_actor=2, unroll_length=8, hidden=(8,)), rl)
        return run(run_config, plan), 4 * plan.initial_params().size

    cached, nbytes = summary("node")
    assert cached["worker_cache_reads"] > 0 and cached["worker_server_reads"] == 0
    # the server sent its parameters only to the reads (the cache's): no push reply carried them
    assert cached["bytes_pulled"] == cached["server_pulls"] * nbytes
    direct, _ = summary("none")
    assert "worker_cache_reads" not in direct
    # without the cache the replies to the pushes that were behind brought them
    assert direct["bytes_pulled"] > direct["server_pulls"] * nbytes
