"""Build Gorila DQN's plan: the network, the server, and bundles or actors + replay + learners.

This is where :class:`~gorila.agents.dqn.config.DQNConfig` is read; every component gets explicit
arguments and value objects built here, from the parts of :mod:`gorila.agents.kit`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict

import gymnasium as gym
import psutil  # type: ignore[import-untyped]  # psutil ships no type hints
from torch import nn

from gorila.actors import QActorSpec
from gorila.actors.nstep import NStepReturns
from gorila.actors.rollout import CentralQActorSpec
from gorila.agents.dqn.bundle import Bundle
from gorila.agents.dqn.config import DQNConfig
from gorila.agents.kit import (
    CHUNK_SECONDS,
    INFERENCE,
    REPLAY_TRAFFIC,
    ReplayTopology,
    greedy_q_inference,
    learner_factory,
    owned_learners,
    q_actor,
    q_learner,
    rl_plan,
)
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig
from gorila.driver.plan import Plan, WorkerSpec
from gorila.errors import ConfigError
from gorila.nets.q import QEvaluationPolicy, build_q_network, greedy_policy, numpy_q_network
from gorila.replay import ShardedReplaySpec, check_replay_memory

# Driver steps per chunk: an actor's or learner's step takes a few milliseconds, so a chunk lasts
# a few tenths of a second and the driver's bookkeeping stays out of the way.
BUNDLE_STEPS_PER_CHUNK = 100
GLOBAL_STEPS_PER_CHUNK = 50


def network(run: RunConfig, cfg: DQNConfig, rl: RLConfig) -> Callable[[], nn.Module]:
    """The architecture, from the seed (picklable: every process builds the same one)."""
    return functools.partial(build_q_network, rl.env, cfg.hidden, run.seed)


def make_plan(run: RunConfig, cfg: DQNConfig, rl: RLConfig) -> Plan:
    """The workers, services and server of one Gorila DQN run: bundles (local replay), or actors →
    replay shards → learners (global replay; the replay's size is checked first against this
    machine's free memory, shared by the shards, which an embedded Ray places all here)."""
    network_fn = network(run, cfg, rl)
    net = network_fn()  # an unknown env or a continuous action space is refused before anything starts
    rule = run.rule(num_workers=cfg.num_learners)
    if rule.barrier and cfg.outlier_k is not None:
        raise ConfigError("outlier_k", "cannot be used with --mode sync: a skipped push would leave the other "
                                       "learners waiting at the barrier")
    envs = rl.env_spec(cfg.envs_per_actor)
    with envs.runner(run.seed) as runner:
        space = runner.observation_space
    assert isinstance(space, gym.spaces.Box)  # the Q-network built above refused any other observations
    refresh = cfg.actor_refresh
    assert refresh is not None  # DQNConfig resolves its default
    returns = NStepReturns(cfg.n_step, cfg.gamma)
    central = rl.central_inference(space, runtime=run.runtime)
    # Bundles hold a learner each: on cuda they share the GPU with the inference server.
    learner_gpus, server_gpus = rl.gpu_shares(run.runtime, cfg.num_learners, central)
    inference = (greedy_q_inference(network_fn, rl, cfg.actors * cfg.envs_per_actor, refresh,
                                    run.runtime, server_gpus),) if central else ()

    twin = numpy_q_network(net)

    def actor(services: dict, in_numpy: bool = True) -> QActorSpec | CentralQActorSpec:
        """Each actor's network copy (its numpy twin where it has one, unless ``in_numpy`` is False:
        a bundle's learner holds torch in the same process), or (``--inference central``) the run's
        inference server."""
        return q_actor(envs, network_fn, cfg.exploration(), returns, seed=run.seed,
                       inference=services[INFERENCE][0] if central else None, timeout_s=run.call_timeout(CHUNK_SECONDS),
                       numpy_network=twin if in_numpy else None)

    learner = q_learner(network_fn, cfg, rl, run.runtime, outlier_k=cfg.outlier_k)
    if cfg.replay == "local" and run.server == "learner" and cfg.actors != 1:
        raise ConfigError("server", f"learner: with --replay local each of the {cfg.actors} bundles holds a "
                                    "learner; one that owns the parameters needs --actors 1 (one bundle, whose "
                                    "actor then reads them in its own process), or --replay global")
    spec = run.server_spec(rule, cfg.optimizer, cfg.lr, learners=cfg.num_learners)
    plan = functools.partial(rl_plan, run, rl, algo="dqn", net=net, network_fn=network_fn, policy_fn=greedy_policy,
                             eval_numpy=twin, eval_epsilon=cfg.EVAL_EPSILON, central=central,
                             config={**asdict(cfg), "target_update": str(cfg.target_update)}, spec=spec)
    if cfg.replay == "local":
        def bundles(services: dict) -> list[WorkerSpec]:
            bundle = functools.partial(Bundle, actor=actor(services, in_numpy=False), learner=learner,
                                       replay_capacity=cfg.replay_capacity, batch_size=cfg.batch_size,
                                       learning_starts=cfg.learning_starts, train_every=cfg.train_every,
                                       actor_refresh=refresh, prefetch=run.runtime != "local")
            # --server learner: the one bundle owns the parameters; its actor pulls them in-process.
            return [WorkerSpec("bundle", learner_factory(bundle, run, spec, 1), cfg.actors, gpus=learner_gpus)]

        return plan(groups=bundles, services=inference,
                    processes=cfg.actors + len(inference), chunk_steps=lambda updates: BUNDLE_STEPS_PER_CHUNK,
                    snapshot=cfg.checkpoint_replay,
                    metrics=("bundle.policy_lag_mean", "bundle.q_mean"), histograms=("bundle.policy_lag",))

    check_replay_memory(cfg.replay_capacity, space.shape, space.dtype,
                        available_bytes=psutil.virtual_memory().available // cfg.replay_shards)
    routing = ShardedReplaySpec(cfg.replay_shards, cfg.actors, cfg.envs_per_actor, cfg.replay_capacity,
                                tuple(space.shape), space.dtype, seed=run.seed,
                                checkpoints=run.resolved_run_dir(rl.env) / "checkpoints" if cfg.checkpoint_replay
                                else None)
    topology = ReplayTopology(routing, cfg.actors, cfg.num_learners, steps_per_add=refresh,
                              refresh_every=None if central else refresh, batch_size=cfg.batch_size,
                              learning_starts=cfg.learning_starts, by_node=cfg.replay_placement == "node",
                              learner_gpus=learner_gpus)
    return plan(groups=lambda services: owned_learners(topology.groups(actor, learner, services), run, spec,
                                                       cfg.num_learners),
                services=(topology.service(), *inference),
                processes=topology.processes + len(inference),
                chunk_steps=lambda updates: GLOBAL_STEPS_PER_CHUNK, snapshot=cfg.checkpoint_replay,
                checkpoint_services=("replay",) if cfg.checkpoint_replay else (),
                metrics=("learner.policy_lag_mean", "learner.q_mean", *REPLAY_TRAFFIC),
                histograms=("learner.policy_lag",))


def evaluation_policy(run: RunConfig, cfg: DQNConfig, rl: RLConfig) -> QEvaluationPolicy:
    """``(network_fn, policy_fn)`` for ``gorila eval``: the architecture and its greedy policy."""
    return network(run, cfg, rl), greedy_policy
