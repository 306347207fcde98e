"""Build the Ape-X plan: actors → prioritized replay shards → learners, on the parameter server::

    actor k (ε_k, n-step rows,  ──add + priorities──► replay shard k % S ──sample (prefetched)──► learner
             own network copy)                        (prioritized, rate-limited) ◄──priorities──    │ push
       ▲ pull every --actor-refresh steps                                                           ▼
       └──────────────────────────────────────── parameter server ◄────────────────────────────────┘

With ``--inference central`` the actors hold no network: they step their envs in two alternating
groups and the run's inference server chooses every action (greedy, batched, refreshed every
--actor-refresh batches); the actor adds ε. Their rows enter replay with the largest priority so far.

This is where :class:`~gorila.agents.apex.config.ApexConfig` is read.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict

import gymnasium as gym
import psutil  # type: ignore[import-untyped]  # psutil ships no type hints

from gorila.actors import ExplorationSchedule, QActorSpec
from gorila.actors.nstep import NStepReturns
from gorila.actors.rollout import CentralQActorSpec
from gorila.agents.apex.config import ApexConfig
from gorila.agents.kit import (
    ACTOR_NICE,
    CHUNK_SECONDS,
    INFERENCE,
    REPLAY_TRAFFIC,
    ReplayTopology,
    greedy_q_inference,
    owned_learners,
    q_actor,
    q_learner,
    rl_plan,
)
from gorila.agents.rl_config import RLConfig
from gorila.config import RunConfig
from gorila.driver.plan import Plan
from gorila.nets.q import QEvaluationPolicy, build_q_network, greedy_policy, numpy_q_network
from gorila.replay import Prioritization, RateLimiter, ShardedReplaySpec, check_replay_memory

STEPS_PER_CHUNK = 20
METRICS = ("replay.size", "replay.added", "replay.sampled", "replay.refused_samples", "replay.priority_max",
           "learner.wait_fraction", "learner.policy_lag_mean", *REPLAY_TRAFFIC)


def make_plan(run: RunConfig, cfg: ApexConfig, rl: RLConfig) -> Plan:
    """Actors, replay shards and learners of one Ape-X run."""
    network_fn, policy_fn = evaluation_policy(run, cfg, rl)
    net = network_fn()  # an unknown env or a continuous action space is refused before anything starts
    envs = rl.env_spec(cfg.envs_per_actor)
    with envs.runner(run.seed) as runner:
        space = runner.observation_space
    assert isinstance(space, gym.spaces.Box)  # the Q-network built above refused any other observations
    check_replay_memory(cfg.replay_capacity, space.shape, space.dtype,
                        available_bytes=psutil.virtual_memory().available // cfg.replay_shards)
    routing = ShardedReplaySpec(
        cfg.replay_shards, cfg.actors, cfg.envs_per_actor, cfg.replay_capacity, tuple(space.shape), space.dtype,
        seed=run.seed, prioritization=Prioritization(cfg.priority_alpha, cfg.priority_beta,
                                                     anneal_inserts=max(rl.total_steps // cfg.replay_shards, 1)),
        limiter=_limiter(cfg),
        checkpoints=run.resolved_run_dir(rl.env) / "checkpoints" if cfg.checkpoint_replay else None)
    exploration = ExplorationSchedule.per_actor(cfg.actors, cfg.eps_alpha, cfg.eps_base)
    returns = NStepReturns(cfg.n_step, cfg.gamma)
    central = rl.central_inference(space, runtime=run.runtime)
    learner_gpus, server_gpus = rl.gpu_shares(run.runtime, cfg.learners, central)
    inference = (greedy_q_inference(network_fn, rl, cfg.actors * cfg.envs_per_actor, cfg.actor_refresh,
                                    run.runtime, server_gpus),) if central else ()

    twin = numpy_q_network(net)

    def actor(services: dict) -> QActorSpec | CentralQActorSpec:
        """Each actor's network copy (which also gives its rows their initial priorities; its numpy
        twin where it has one), or (``--inference central``) the run's inference server."""
        return q_actor(envs, network_fn, exploration, returns, seed=run.seed,
                       inference=services[INFERENCE][0] if central else None, timeout_s=run.call_timeout(CHUNK_SECONDS),
                       numpy_network=twin)

    # The actors yield the CPU to the learner: they only make data it would not keep up with.
    topology = ReplayTopology(routing, cfg.actors, cfg.learners, steps_per_add=cfg.add_every,
                              refresh_every=None if central else cfg.actor_refresh, batch_size=cfg.batch_size,
                              learning_starts=cfg.learning_starts, prefetch=cfg.prefetch, prioritized=True,
                              actor_nice=ACTOR_NICE, by_node=cfg.replay_placement == "node",
                              learner_gpus=learner_gpus)
    learner = q_learner(network_fn, cfg, rl, run.runtime)
    spec = run.server_spec(run.rule(num_workers=cfg.learners), cfg.optimizer, cfg.lr, learners=cfg.learners)
    return rl_plan(
        run, rl, algo="apex", net=net, network_fn=network_fn, policy_fn=policy_fn, eval_numpy=twin,
        eval_epsilon=cfg.EVAL_EPSILON,
        central=central, config={**asdict(cfg), "target_update": str(cfg.target_update)},
        spec=spec, groups=lambda services: owned_learners(topology.groups(actor, learner, services), run, spec,
                                                          cfg.learners),
        services=(topology.service(), *inference),
        processes=topology.processes + len(inference), chunk_steps=lambda updates: STEPS_PER_CHUNK,
        metrics=METRICS, histograms=("learner.policy_lag",),
        checkpoint_services=("replay",) if cfg.checkpoint_replay else (), snapshot=cfg.checkpoint_replay)


def _limiter(cfg: ApexConfig) -> RateLimiter:
    """Each shard's rate limiter: sampling starts at its share of ``learning_starts``; with
    ``samples_per_insert``, the ratio is held within a band wide enough for a whole minibatch and a
    whole add of every actor writing to the shard."""
    min_size = math.ceil(cfg.learning_starts / cfg.replay_shards)
    if cfg.samples_per_insert is None:
        return RateLimiter.min_size(min_size)
    rows_per_add = cfg.add_every * cfg.envs_per_actor * math.ceil(cfg.actors / cfg.replay_shards)
    error_buffer = 2 * max(2 * cfg.batch_size * cfg.prefetch * cfg.learners, cfg.samples_per_insert * rows_per_add)
    return RateLimiter.sample_to_insert_ratio(cfg.samples_per_insert, min_size, error_buffer)


def evaluation_policy(run: RunConfig, cfg: ApexConfig, rl: RLConfig) -> QEvaluationPolicy:
    """``(network_fn, policy_fn)`` for evaluation and ``gorila eval``: the architecture and its greedy policy."""
    return functools.partial(build_q_network, rl.env, cfg.hidden, run.seed, cfg.dueling), greedy_policy
