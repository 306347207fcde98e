"""Two A3C workers, built as `gorila train` builds them, learn CartPole-v1 on an in-process server."""

import numpy as np
import pytest

from gorila.agents.a3c.builder import make_plan
from gorila.agents.a3c.config import A3CConfig
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig
from gorila.runtime import LocalRuntime

RANDOM_POLICY_RETURN = 22   # a uniform policy keeps CartPole up ~22 steps
TARGET = 150
MAX_ENV_STEPS = 60_000       # the default config passes TARGET within ~15k steps on these seeds


def _train(mode: str, seed: int) -> tuple[float, list[dict]]:
    plan = make_plan(RunConfig(algo="a3c", mode=mode, seed=seed), A3CConfig(workers=2), RLConfig())
    runtime = LocalRuntime()
    shards = runtime.start_shards(plan.spec, plan.initial_params())
    (spec,) = plan.groups({})
    workers = runtime.start_workers(spec.factory, spec.count, shards.server, name="worker")
    mean, env_steps = 0.0, 0
    while env_steps < MAX_ENV_STEPS and mean < TARGET:
        reports = workers.run_steps(1)  # in turn: under the synchronous rule both push, then the mean is applied
        env_steps = sum(r["env_steps"] for r in reports)
        returns = [x for r in reports for x in r["recent_returns"]]
        mean = float(np.mean(returns)) if len(returns) >= 10 else 0.0
    return mean, reports


@pytest.mark.parametrize("mode", ["sync", "async"], ids=["sync-a2c", "async-a3c"])
def test_two_workers_learn_cartpole(mode):
    mean, reports = _train(mode, seed=0)
    assert mean >= TARGET > 5 * RANDOM_POLICY_RETURN
    assert all(r["pushes_rejected"] == 0 for r in reports)
    if mode == "sync":   # every push of a round joins the same update: versions advance together
        assert reports[0]["updates_pushed"] == reports[1]["updates_pushed"] == reports[1]["version"] + 1
        assert all(r["pushes_counted"] == r["updates_pushed"] for r in reports)
