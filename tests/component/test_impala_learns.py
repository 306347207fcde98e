"""IMPALA on the local runtime, built as `gorila train --algo impala` builds it: actors fill trajectory
queues, learners push V-trace gradients, and the greedy policy reaches CartPole's target."""

import pytest

from gorila.agents.impala.builder import make_plan
from gorila.agents.impala.config import ImpalaConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig
from gorila.driver.loop import run

MAX_ENV_STEPS = 200_000  # the default config reaches 475 within ~20-60k steps on these seeds


def impala(tmp_path, mode="async", steps=MAX_ENV_STEPS, seed=0, rl=None, server="process", **overrides):
    run_config = RunConfig(algo="impala", runtime="local", mode=mode, seed=seed, run_dir=tmp_path, server=server)
    rl = rl or RLConfig(total_steps=steps, eval_every_s=0.5)
    return run(run_config, make_plan(run_config, ImpalaConfig(**overrides), rl))


@pytest.mark.parametrize("mode, learners, server", [("async", 1, "process"), ("sync", 2, "process"),
                                                    ("async", 1, "learner")])
def test_impala_learns_cartpole(tmp_path, mode, learners, server):
    summary = impala(tmp_path, mode=mode, learners=learners, server=server)
    assert summary["reached_target"] and summary["best_eval_return"] >= 475, summary["evaluations"][-3:]
    assert summary["env_steps"] < MAX_ENV_STEPS
    assert summary["workers"] == {"actor": 2, "learner": learners}
    lag = {int(k): v for k, v in summary["learner_policy_lag_histogram"].items()}
    assert sum(lag.values()) > 0 and summary["learner_policy_lag_mean"] >= 0


def test_segments_beyond_the_max_policy_lag_are_dropped_and_counted(tmp_path):
    # actors pull once every 50 segments: their data falls far behind the learner, which drops it
    summary = impala(tmp_path, steps=20_000, actor_refresh=50, max_policy_lag=2,
                     rl=RLConfig(total_steps=20_000, eval_every_s=60, eval_episodes=1, stop_at_target=False))
    assert summary["trajectories_dropped_stale"] > 0
    lag = {int(k): v for k, v in summary["learner_policy_lag_histogram"].items()}
    assert max(lag) <= 2  # bins 0, 1, 2: nothing older reached a gradient
