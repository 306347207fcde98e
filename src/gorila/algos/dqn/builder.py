"""Build Gorila DQN's plan: the network, the server, and bundles or actors + replay + learners.

This is where :class:`~gorila.algos.dqn.config.DQNConfig` is read; every component gets explicit
arguments and value objects built here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict

import gymnasium as gym
import psutil
from torch import nn

from gorila.actors import QActorSpec, ReplayActor
from gorila.actors.nstep import NStepReturns
from gorila.actors.rollout import CentralQActorSpec
from gorila.algos.dqn.config import DQNConfig
from gorila.algos.dqn.networks import build_q_network
from gorila.config import RunConfig
from gorila.driver.plan import Budget, Plan, ServiceSpec, WorkerSpec
from gorila.driver.policy_evaluation import PolicyEvaluation
from gorila.driver.rl_config import RLConfig, resolve_device
from gorila.envs.spec import EnvSpec
from gorila.errors import ConfigError
from gorila.inference import SERVICE as INFERENCE
from gorila.inference import inference_service
from gorila.inference.policies import GreedyQPolicy
from gorila.learners.bundle import Bundle
from gorila.learners.q_learner import QLearner
from gorila.learners.replay_learner import ReplayLearner
from gorila.nets import FlatParams
from gorila.nets.q import greedy_policy
from gorila.replay import RemoteReplay, ShardedReplaySpec, check_replay_memory

OPTIMIZER_DEFAULT = "adagrad"  # Gorila's server optimizer
EVAL_EPSILON = 0.05  # the DQN papers evaluate ε-greedily with 0.05
# Driver steps per chunk: an actor's or learner's step takes a few milliseconds, so a chunk lasts
# a few tenths of a second and the driver's bookkeeping stays out of the way.
BUNDLE_STEPS_PER_CHUNK = 100
GLOBAL_STEPS_PER_CHUNK = 50
CHUNK_SECONDS = 0.5  # how long a chunk lasts once sized to the workers' speed
INFERENCE_METRICS = ("inference.mean_batch", "inference.dropped")


def network(run: RunConfig, cfg: DQNConfig, rl: RLConfig) -> Callable[[], nn.Module]:
    """The architecture, from the seed (picklable: every process builds the same one)."""
    return functools.partial(build_q_network, rl.env, cfg.hidden, run.seed)


def make_plan(run: RunConfig, cfg: DQNConfig, rl: RLConfig) -> Plan:
    """The workers, services and server of one Gorila DQN run."""
    network_fn = network(run, cfg, rl)
    net = network_fn()  # an unknown env or a continuous action space is refused before anything starts
    rule = run.rule(num_workers=cfg.num_learners)
    if rule.barrier and cfg.outlier_k is not None:
        raise ConfigError("outlier_k", "cannot be used with --mode sync: a skipped push would leave the other "
                                       "learners waiting at the barrier")
    envs = EnvSpec(rl.env, cfg.envs_per_actor, cfg.env_backend, cfg.terminal_on_life_loss)
    with envs.runner(run.seed) as runner:
        space = runner.observation_space
    returns = NStepReturns(cfg.n_step, cfg.gamma)
    central = rl.central_inference(space)

    def actor(services: dict) -> QActorSpec | CentralQActorSpec:
        """Each actor's network copy, or (``--inference central``) the node's inference server."""
        if central:
            return CentralQActorSpec(envs, services[INFERENCE][0], cfg.exploration(), returns, seed=run.seed,
                                     timeout_s=run.call_timeout_s)
        return QActorSpec(envs, network_fn, cfg.exploration(), returns, seed=run.seed)

    learner = functools.partial(QLearner, network_fn, loss=cfg.loss, target=cfg.target,
                                target_update=cfg.target_update, outlier_k=cfg.outlier_k,
                                max_grad_norm=cfg.max_grad_norm, device=resolve_device(rl.device))
    epsilon = rl.eval_epsilon if rl.eval_epsilon is not None else EVAL_EPSILON
    common = dict(
        algo="dqn", label=rl.env, initial_params=lambda: FlatParams(net).get(),
        spec=run.server_spec(rule, OPTIMIZER_DEFAULT, cfg.lr),
        evaluation=PolicyEvaluation(rl.env, network_fn, greedy_policy, episodes=rl.eval_episodes, epsilon=epsilon,
                                    seed=run.seed, noop_max=rl.eval_noop_max, every_s=rl.eval_every_s,
                                    target=rl.target()),
        budget=Budget(rl.total_steps, "env_steps"), stop_at_target=rl.stop_at_target,
        config={**asdict(cfg), "target_update": str(cfg.target_update), **asdict(rl), "eval_epsilon": epsilon,
                "inference": "central" if central else "local"},
        network_fn=network_fn)
    metrics = INFERENCE_METRICS if central else ()
    inference = ()
    if central:
        inference = (inference_service(functools.partial(GreedyQPolicy, network_fn, device=rl.server_device()),
                                       rl.batching_rule(cfg.actors * cfg.envs_per_actor), cfg.actor_refresh),)
    if cfg.replay == "local":
        def bundles(services: dict) -> list[WorkerSpec]:
            bundle = functools.partial(Bundle, actor=actor(services), learner=learner,
                                       replay_capacity=cfg.replay_capacity, batch_size=cfg.batch_size,
                                       learning_starts=cfg.learning_starts, train_every=cfg.train_every,
                                       actor_refresh=cfg.actor_refresh)
            return [WorkerSpec("bundle", bundle, cfg.actors)]

        return Plan(**common, groups=bundles, services=inference, processes=cfg.actors + len(inference),
                    chunk_steps=lambda updates: BUNDLE_STEPS_PER_CHUNK, chunk_seconds=CHUNK_SECONDS,
                    metrics=("bundle.policy_lag_mean", *metrics), histograms=("bundle.policy_lag",))
    return Plan(**common, **_global_replay(run, cfg, space, actor, learner, inference),
                metrics=("learner.policy_lag_mean", *metrics), histograms=("learner.policy_lag",))


def _global_replay(run: RunConfig, cfg: DQNConfig, space: gym.Space,
                   actor: Callable[[dict], QActorSpec | CentralQActorSpec], learner: Callable[[], QLearner],
                   inference: tuple[ServiceSpec, ...]) -> dict:
    """Actors → replay shards → learners::

        actor k ──add──► replay shard k % S ◄──sample (prefetched)── learner j
           ▲ pull                                                        │ push
           └────────────────────── parameter server ◄────────────────────┘

    The replay's size is checked first against this machine's free memory, shared by the shards
    (an embedded Ray places them all here); each shard checks its own machine again when built.
    """
    check_replay_memory(cfg.replay_capacity, space.shape, space.dtype,
                        available_bytes=psutil.virtual_memory().available // cfg.replay_shards)
    routing = ShardedReplaySpec(cfg.replay_shards, cfg.actors, cfg.envs_per_actor, cfg.replay_capacity,
                                tuple(space.shape), space.dtype, seed=run.seed)

    def groups(services: dict) -> list[WorkerSpec]:
        replay = [RemoteReplay(endpoint) for endpoint in services["replay"]]
        actors = functools.partial(ReplayActor, actor=actor(services), replay=replay, routing=routing,
                                   steps_per_add=cfg.actor_refresh,
                                   refresh_every=None if inference else cfg.actor_refresh, prioritized=False)
        learners = functools.partial(ReplayLearner, learner=learner, replay=replay, batch_size=cfg.batch_size,
                                     learning_starts=cfg.learning_starts)
        return [WorkerSpec("actor", actors, cfg.actors, node_of=routing.shard_of if by_node else None),
                WorkerSpec("learner", learners, cfg.num_learners)]

    by_node = cfg.replay_placement == "node"
    return dict(groups=groups, param_cache=cfg.param_cache == "node",
                services=(ServiceSpec("replay", routing.build, cfg.replay_shards, node_of=routing.node_of_shard if by_node
                                      else None), *inference),
                processes=cfg.actors + cfg.num_learners + cfg.replay_shards + len(inference),
                chunk_steps=lambda updates: GLOBAL_STEPS_PER_CHUNK, chunk_seconds=CHUNK_SECONDS)


def evaluation_policy(run: RunConfig, cfg: DQNConfig, rl: RLConfig):
    """``(network_fn, policy_fn)`` for ``gorila eval``: the architecture and its greedy policy."""
    return network(run, cfg, rl), greedy_policy
