"""Build the Ape-X plan: actors → prioritized replay shards → learners, on the parameter server::

    actor k (ε_k, n-step rows,  ──add + priorities──► replay shard k % S ──sample (prefetched)──► learner
             own network copy)                        (prioritized, rate-limited) ◄──priorities──    │ push
       ▲ pull every --actor-refresh steps                                                           ▼
       └──────────────────────────────────────── parameter server ◄────────────────────────────────┘

With ``--inference central`` the actors hold no network: they step their envs in two alternating
groups and the node's inference server chooses every action (greedy, batched, refreshed every
--actor-refresh batches); the actor adds ε. Their rows enter replay with the largest priority so far.

This is where :class:`~gorila.algos.apex.config.ApexConfig` is read.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict

import psutil

from gorila.actors import ExplorationSchedule, QActorSpec, ReplayActor
from gorila.actors.nstep import NStepReturns
from gorila.actors.rollout import CentralQActorSpec
from gorila.algos.apex.config import ApexConfig
from gorila.algos.dqn.networks import build_q_network
from gorila.config import RunConfig
from gorila.driver.plan import Budget, Plan, ServiceSpec, WorkerSpec
from gorila.driver.policy_evaluation import PolicyEvaluation
from gorila.driver.rl_config import RLConfig, resolve_device
from gorila.envs.spec import EnvSpec
from gorila.inference import SERVICE as INFERENCE
from gorila.inference import inference_service
from gorila.inference.policies import GreedyQPolicy
from gorila.learners.q_learner import QLearner
from gorila.learners.replay_learner import ReplayLearner
from gorila.nets import FlatParams
from gorila.nets.q import greedy_policy
from gorila.replay import Prioritization, RateLimiter, RemoteReplay, ShardedReplaySpec, check_replay_memory

OPTIMIZER_DEFAULT = "adam"
EVAL_EPSILON = 0.05  # DQN-family agents are evaluated ε-greedily with 0.05
STEPS_PER_CHUNK = 20
CHUNK_SECONDS = 0.5  # how long a chunk lasts once sized to the workers' speed
ACTOR_NICE = 5
METRICS = ("replay.size", "replay.added", "replay.sampled", "replay.refused_samples", "replay.priority_max",
           "learner.wait_fraction", "learner.policy_lag_mean")
# With --param-cache node: reads reaching the server from the caches and from actors that fell back,
# bytes moved per version per node, and how many versions behind the server the actors act.
CACHE_METRICS = ("param_cache.pulls", "param_cache.bytes_per_version", "actor.cache_reads", "actor.server_reads",
                 "actor.param_staleness_mean")
INFERENCE_METRICS = ("inference.mean_batch", "inference.dropped")


def make_plan(run: RunConfig, cfg: ApexConfig, rl: RLConfig) -> Plan:
    """Actors, replay shards and learners of one Ape-X run."""
    network_fn, policy_fn = evaluation_policy(run, cfg, rl)
    net = network_fn()  # an unknown env or a continuous action space is refused before anything starts
    envs = EnvSpec(rl.env, cfg.envs_per_actor, cfg.env_backend, cfg.terminal_on_life_loss)
    with envs.runner(run.seed) as runner:
        space = runner.observation_space
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
    central = rl.central_inference(space)
    inference = ()
    if central:
        inference = (inference_service(functools.partial(GreedyQPolicy, network_fn, device=rl.server_device()),
                                       rl.batching_rule(cfg.actors * cfg.envs_per_actor), cfg.actor_refresh),)
    learner = functools.partial(QLearner, network_fn, loss=cfg.loss, target=cfg.target,
                                target_update=cfg.target_update, outlier_k=None, max_grad_norm=cfg.max_grad_norm,
                                device=resolve_device(rl.device))

    def groups(services: dict) -> list[WorkerSpec]:
        replay = [RemoteReplay(endpoint) for endpoint in services["replay"]]
        if central:  # rows enter with the largest priority so far: a rollout worker has no network
            actor = CentralQActorSpec(envs, services[INFERENCE][0], exploration, returns, seed=run.seed,
                                      timeout_s=run.call_timeout_s)
            actors = functools.partial(ReplayActor, actor=actor, replay=replay, routing=routing,
                                       steps_per_add=cfg.add_every, refresh_every=None, prioritized=False)
        else:
            actors = functools.partial(ReplayActor, actor=QActorSpec(envs, network_fn, exploration, returns,
                                                                     seed=run.seed),
                                       replay=replay, routing=routing, steps_per_add=cfg.add_every,
                                       refresh_every=cfg.actor_refresh, prioritized=True)
        learners = functools.partial(ReplayLearner, learner=learner, replay=replay, batch_size=cfg.batch_size,
                                     learning_starts=cfg.learning_starts, prefetch=cfg.prefetch, prioritized=True)
        # The actors yield the CPU to the learner: they only make data it would not keep up with.
        # Placed by node, actor k runs on the node of the shard it writes to.
        return [WorkerSpec("actor", actors, cfg.actors, nice=ACTOR_NICE,
                           node_of=routing.shard_of if by_node else None),
                WorkerSpec("learner", learners, cfg.learners)]

    by_node = cfg.replay_placement == "node"
    cache = cfg.param_cache == "node"

    epsilon = rl.eval_epsilon if rl.eval_epsilon is not None else EVAL_EPSILON
    return Plan(
        algo="apex", label=rl.env, initial_params=lambda: FlatParams(net).get(),
        spec=run.server_spec(run.rule(num_workers=cfg.learners), OPTIMIZER_DEFAULT, cfg.lr),
        groups=groups,
        services=(ServiceSpec("replay", routing.build, cfg.replay_shards, node_of=routing.node_of_shard if by_node else None),
                  *inference),
        param_cache=cache,
        evaluation=PolicyEvaluation(rl.env, network_fn, policy_fn, episodes=rl.eval_episodes, epsilon=epsilon,
                                    seed=run.seed, noop_max=rl.eval_noop_max, every_s=rl.eval_every_s,
                                    target=rl.target()),
        budget=Budget(rl.total_steps, "env_steps"), processes=cfg.actors + cfg.learners + cfg.replay_shards + len(inference),
        chunk_steps=lambda updates: STEPS_PER_CHUNK, chunk_seconds=CHUNK_SECONDS,
        stop_at_target=rl.stop_at_target,
        metrics=METRICS + (CACHE_METRICS if cache else ()) + (INFERENCE_METRICS if central else ()),
        histograms=("learner.policy_lag",),
        checkpoint_services=("replay",) if cfg.checkpoint_replay else (),
        config={**asdict(cfg), "target_update": str(cfg.target_update), **asdict(rl), "eval_epsilon": epsilon,
                "inference": "central" if central else "local"})


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


def evaluation_policy(run: RunConfig, cfg: ApexConfig, rl: RLConfig):
    """``(network_fn, policy_fn)`` for evaluation and ``gorila eval``: the architecture and its greedy policy."""
    return functools.partial(build_q_network, rl.env, cfg.hidden, run.seed, cfg.dueling), greedy_policy
