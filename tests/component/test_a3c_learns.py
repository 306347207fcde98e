"""Two A3C workers and an in-process parameter server learn CartPole-v1 with the default config."""

import numpy as np
import pytest

from gorila.algos.a3c.builder import learning_rates, make_network
from gorila.algos.a3c.config import A3CConfig
from gorila.algos.a3c.worker import A3CWorker
from gorila.nets.flat import FlatParams
from gorila.params import LocalEndpoint, ServerSpec, UpdateRule

RANDOM_POLICY_RETURN = 22   # a uniform policy keeps CartPole up ~22 steps
TARGET = 150
MAX_ENV_STEPS = 60_000       # the default config passes TARGET within ~15k steps on these seeds


def _train(rule: UpdateRule, seed: int) -> tuple[float, list[dict]]:
    cfg = A3CConfig()
    net = make_network("CartPole-v1", cfg, seed)
    shards = ServerSpec(rule=rule, optimizer=cfg.optimizer, lr=learning_rates(net, cfg)).build(
        FlatParams(net).get())
    endpoints = [LocalEndpoint(s) for s in shards]
    workers = [A3CWorker(k, endpoints, env_id="CartPole-v1", cfg=cfg, seed=seed, barrier=rule.barrier,
                         timeout_s=5.0) for k in range(2)]
    mean = 0.0
    while sum(w.env_steps for w in workers) < MAX_ENV_STEPS and mean < TARGET:
        for w in workers:   # in turn: under the synchronous rule both push, then the mean is applied
            w.step()
        returns = [r for w in workers for r in w.report()["recent_returns"]]
        mean = float(np.mean(returns)) if len(returns) >= 10 else 0.0
    return mean, [w.report() for w in workers]


@pytest.mark.parametrize("rule", [UpdateRule.synchronous(2), UpdateRule.asynchronous()],
                         ids=["sync-a2c", "async-a3c"])
def test_two_workers_learn_cartpole(rule):
    mean, reports = _train(rule, seed=0)
    assert mean >= TARGET > 5 * RANDOM_POLICY_RETURN
    assert all(r["pushes_rejected"] == 0 for r in reports)
    if rule.barrier:   # every push of a round joins the same update: versions advance together
        assert reports[0]["updates_pushed"] == reports[1]["updates_pushed"] == reports[1]["version"] + 1
        assert all(r["pushes_counted"] == r["updates_pushed"] for r in reports)
