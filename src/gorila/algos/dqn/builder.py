"""Build Gorila DQN's plan for the RL driver: network, server, bundles or actors + replay + learners."""

from __future__ import annotations

import functools
from dataclasses import asdict
from typing import Any

from gorila.algos.dqn.agent import build_q_network, greedy_policy
from gorila.algos.dqn.bundle import Bundle
from gorila.algos.dqn.config import OPTIMIZER_DEFAULT, DQNConfig
from gorila.config import RunConfig
from gorila.errors import ConfigError
from gorila.params import ServerSpec
from gorila.rl.config import TrainConfig, resolve_device
from gorila.rl.driver import RLPlan, WorkerSpec, run_rl


def evaluation_policy(run: RunConfig, cfg: DQNConfig):
    """``(network_fn, policy_fn)`` for ``gorila eval``: the architecture and its greedy policy."""
    return functools.partial(build_q_network, run.env, cfg.hidden, run.seed), greedy_policy


def make_plan(run: RunConfig, cfg: DQNConfig, train: TrainConfig) -> RLPlan:
    """The workers and server of one Gorila DQN run."""
    device = resolve_device(train.device)
    network_fn, policy_fn = evaluation_policy(run, cfg)
    network_fn()  # an unknown env or a continuous action space is refused before anything starts
    rule = run.rule(num_workers=cfg.num_learners)
    if rule.barrier and cfg.outlier_k is not None:
        raise ConfigError("outlier_k", "cannot be used with --mode sync: a skipped push would leave the other "
                                       "learners waiting at the barrier")
    spec = ServerSpec(rule=rule, num_shards=run.shards, optimizer=run.optimizer or OPTIMIZER_DEFAULT, lr=cfg.lr)
    common = dict(env_id=run.env, cfg=cfg, seed=run.seed, network_fn=network_fn, barrier=rule.barrier,
                  timeout_s=train.call_timeout_s)
    if cfg.replay == "local":
        bundle = functools.partial(Bundle, device=device, **common)
        return RLPlan(algo="dqn", env_id=run.env, network_fn=network_fn, policy_fn=policy_fn, spec=spec,
                      workers=lambda services: [WorkerSpec("bundle", bundle, cfg.actors)],
                      processes=cfg.actors, steps_per_call=100, config=asdict(cfg))
    from gorila.algos.dqn.distributed import global_replay_plan

    return global_replay_plan(run, cfg, spec, network_fn, device, train.call_timeout_s)


def train(run: RunConfig, cfg: DQNConfig, train_cfg: TrainConfig) -> dict[str, Any]:
    return run_rl(run, train_cfg, make_plan(run, cfg, train_cfg))
