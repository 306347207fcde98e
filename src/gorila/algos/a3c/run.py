"""Build the A3C / A2C plan for the RL driver: the same workers under every update rule."""

from __future__ import annotations

import functools
from dataclasses import asdict
from typing import Any

from gorila.algos.a3c.builder import greedy_policy, learning_rates, make_network
from gorila.algos.a3c.config import A3CConfig
from gorila.algos.a3c.worker import A3CWorker
from gorila.config import RunConfig
from gorila.params import ServerSpec
from gorila.rl.config import TrainConfig
from gorila.rl.driver import RLPlan, WorkerSpec, run_rl


def evaluation_policy(run: RunConfig, cfg: A3CConfig):
    """``(network_fn, policy_fn)`` for ``gorila eval``: the architecture and its greedy policy."""
    return functools.partial(make_network, run.env, cfg, run.seed), greedy_policy


def make_plan(run: RunConfig, cfg: A3CConfig, train: TrainConfig) -> RLPlan:
    """``--workers`` A3C workers; under ``sync`` they are A2C, under ``semi-async`` seed 002's variant."""
    network_fn, policy_fn = evaluation_policy(run, cfg)
    net = network_fn()  # an unsupported env is refused here, before anything starts
    rule = run.rule()
    spec = ServerSpec(rule=rule, num_shards=run.shards, optimizer=run.optimizer or cfg.optimizer,
                      lr=learning_rates(net, cfg))  # policy and value parameters keep their own rates
    worker = functools.partial(A3CWorker, env_id=run.env, cfg=cfg, seed=run.seed, barrier=rule.barrier,
                               timeout_s=train.call_timeout_s)
    return RLPlan(algo="a3c", env_id=run.env, network_fn=network_fn, policy_fn=policy_fn, spec=spec,
                  workers=lambda services: [WorkerSpec("worker", worker, run.workers)],
                  processes=run.workers, steps_per_call=20, config=asdict(cfg))


def train(run: RunConfig, cfg: A3CConfig, train_cfg: TrainConfig) -> dict[str, Any]:
    return run_rl(run, train_cfg, make_plan(run, cfg, train_cfg))
