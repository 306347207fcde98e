"""The builder kit: the parts of a plan that the RL algorithms' builders share.

A builder reads its own config and composes these; none of them reads a config object of an
algorithm, only the :class:`~gorila.agents.rl_config.RLConfig` every RL algorithm shares and explicit
arguments::

    network_fn = functools.partial(build_q_network, rl.env, cfg.hidden, run.seed)
    net = network_fn()                                     # refuses an unsupported env before anything starts
    central = rl.central_inference(space)
    services = (greedy_q_inference(network_fn, rl, total_envs=8, refresh_every=4, runtime=run.runtime),) \
        if central else ()
    topology = ReplayTopology(routing, actors=2, learners=1, steps_per_add=4, refresh_every=4,
                              batch_size=64, learning_starts=1000)
    return rl_plan(run, rl, algo="dqn", net=net, network_fn=network_fn, policy_fn=greedy_policy,
                   eval_epsilon=0.05, central=central, config=asdict(cfg),
                   spec=..., groups=lambda services: topology.groups(actor, learner, services),
                   services=(topology.service(), *services), processes=topology.processes + len(services))

``rl_plan`` fills what every RL plan has: the label, the initial parameters, the policy evaluation,
the env-step budget, the stop at the target, the inference metrics with central inference, the
chunk's length in seconds and the ``config.json`` record.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol, TypeVar

from torch import nn

from gorila.actors import ExplorationSchedule, QActorSpec, ReplayActor
from gorila.actors.nstep import NStepReturns
from gorila.actors.rollout import CentralQActorSpec
from gorila.agents.rl_config import ONE_A_SECOND, RLConfig, resolve_device
from gorila.config import RunConfig
from gorila.core import ReplayClient
from gorila.driver.plan import Budget, Plan, ServiceSpec, WorkerSpec
from gorila.driver.policy_evaluation import PolicyEvaluation
from gorila.envs.spec import EnvSpec
from gorila.errors import ConfigError
from gorila.inference.batching import BatchingRule
from gorila.inference.policies import GreedyQPolicy, RecurrentSampledPolicy, SampledPolicy
from gorila.inference.server import InferencePolicy, InferenceServer, RecurrentInferencePolicy
from gorila.learners.q_learner import QLearner
from gorila.learners.replay_learner import ReplayLearner
from gorila.learners.target import TargetUpdate
from gorila.nets import FlatParams
from gorila.nets.numpy_conv import NumpyNetwork
from gorila.params.owned import owning_learner
from gorila.params.replicas import replicated_learner
from gorila.params.server import ServerSpec
from gorila.params.tiers import CacheTiers
from gorila.replay import RemoteReplay, ShardedReplaySpec
from gorila.reply import ServiceEndpoint
from gorila.trajectory import RemoteQueue

#: The niceness of the actors that feed a learner (Ape-X's, IMPALA's, PPO's): where actors and learner
#: share cores they yield the CPU to it, so that the learner, the pipeline's narrowest stage, never
#: waits for a core while actors act ahead (docs/benchmarks.md, "Removing downtime, stage by stage").
ACTOR_NICE = 5
#: The inference service's name in a plan (``services[INFERENCE]`` in its ``groups``).
INFERENCE = "inference"
#: The inference server's columns in ``metrics.csv`` with central inference.
INFERENCE_METRICS = ("inference.mean_batch", "inference.dropped", "inference.bytes_observations",
                     "inference.bytes_actions")
#: A global replay's traffic, counted as the parameter server's bytes pushed and pulled are.
REPLAY_TRAFFIC = ("replay.bytes_added", "replay.bytes_sampled")
#: How long a chunk lasts once the driver has sized it to the workers' speed: long enough that the
#: driver's calls between chunks cost little, short enough that rows and evaluations stay frequent.
CHUNK_SECONDS = 0.5


def cache_metrics(tiers: CacheTiers | None, readers: str) -> tuple[str, ...]:
    """With ``--param-cache node``: the versions sent to the caches and those they pulled (their
    first, and each catch-up after a missed push; the rack caches' too with ``--cache-tiers
    node,rack``), reads reaching the server from the ``readers`` group's workers that fell back,
    bytes moved per version per node, and how many versions behind the server those workers act."""
    if tiers is None:
        return ()
    rack = ("rack_cache.pushes", "rack_cache.pulls") if tiers.rack else ()
    return ("param_cache.pushes", "param_cache.pulls", "param_cache.bytes_per_version", f"{readers}.cache_reads",
            f"{readers}.server_reads", f"{readers}.param_staleness_mean") + rack


def inference_service(policy: Callable[[], InferencePolicy | RecurrentInferencePolicy], rule: BatchingRule,
                      refresh_every: int, gpus: float = 0.0) -> ServiceSpec:
    """The plan's inference server: one per run, on one node (rollout workers reach it through
    shared memory, so they must share its node); it pulls parameters every ``refresh_every``
    batches; ``gpus``: its share of a GPU (:meth:`RLConfig.gpu_shares`)."""
    factory = functools.partial(InferenceServer, policy=policy, rule=rule, refresh_every=refresh_every)
    return ServiceSpec(INFERENCE, factory, 1, uses_server=True, gpus=gpus)


def greedy_q_inference(network_fn: Callable[[], nn.Module], rl: RLConfig, total_envs: int,
                       refresh_every: int, runtime: str, gpus: float = 0.0) -> ServiceSpec:
    """The inference server of a Q-learning plan: greedy actions of the Q-network (actors add ε),
    a batch being one env group of every actor by default."""
    policy = functools.partial(GreedyQPolicy, network_fn, device=rl.server_device(runtime))
    return inference_service(policy, rl.batching_rule(total_envs), refresh_every, gpus)


def sampled_inference(network_fn: Callable[[], nn.Module], rl: RLConfig, total_envs: int, refresh_every: int,
                      seed: int, runtime: str, gpus: float = 0.0, recurrent: bool = False) -> ServiceSpec:
    """The inference server of a segment-actor plan (IMPALA, PPO): actions sampled from the
    actor-critic, returned with their log-probabilities, a batch being one env group of every actor
    by default; a ``recurrent`` network's server keeps each env's core state."""
    kind = RecurrentSampledPolicy if recurrent else SampledPolicy
    policy = functools.partial(kind, network_fn, device=rl.server_device(runtime), seed=seed)
    return inference_service(policy, rl.batching_rule(total_envs), refresh_every, gpus)


#: The network a plan's ``network_fn`` builds, which its evaluation's ``policy_fn`` takes.
Net = TypeVar("Net", bound=nn.Module)


def rl_plan(run: RunConfig, rl: RLConfig, *, algo: str, net: nn.Module, network_fn: Callable[[], Net],
            policy_fn: Callable[[Net], Any], eval_epsilon: float, central: bool, config: dict,
            metrics: tuple[str, ...] = (), eval_numpy: NumpyNetwork | None = None, cache_readers: str = "actor",
            eval_every_s: float = ONE_A_SECOND, **plan: Any) -> Plan:
    """A :class:`Plan` with the fields every RL algorithm fills the same way; ``plan`` holds the
    algorithm's own (``spec``, ``groups``, ``services``, ``processes``, ``chunk_steps``, ...).

    ``eval_epsilon`` is the algorithm's evaluation ε, used unless ``--eval-epsilon`` is given;
    ``eval_every_s`` its evaluation cadence on Ray, unless ``--eval-every-s`` is given (on the
    local runtime :data:`~gorila.agents.rl_config.ONE_A_SECOND`);
    ``config`` the algorithm's own settings for ``config.json`` (the RL settings are added);
    ``eval_numpy`` the network's greedy policy in numpy, where it has a numpy twin (a plain Q-network's,
    :func:`gorila.nets.q.numpy_q_network`, or an actor-critic's policy head,
    :func:`gorila.nets.numpy_policy.numpy_policy`): the evaluator then plays it in a process without torch.
    With ``--param-cache node`` the plan places the caches ``--cache-tiers`` names, and its rows
    carry their counters and those of the group that reads them, ``cache_readers`` (:func:`cache_metrics`).
    """
    epsilon = rl.eval_epsilon if rl.eval_epsilon is not None else eval_epsilon
    if rl.eval_every_s is not None:
        eval_every_s = rl.eval_every_s
    elif run.runtime == "local":
        eval_every_s = ONE_A_SECOND
    evaluation = PolicyEvaluation(rl.env, network_fn, policy_fn, episodes=rl.eval_episodes, epsilon=epsilon,
                                  seed=run.seed, noop_max=rl.eval_noop_max, every_s=eval_every_s,
                                  every_steps=rl.eval_every_steps, numpy_policy=eval_numpy,
                                  target=rl.target() if rl.target_on == "eval" else None)
    record = {**config, **asdict(rl), "eval_epsilon": epsilon, "eval_every_s": eval_every_s,
              "inference": "central" if central else "local"}
    # The local runtime's chunks keep their size: rows then fall at the same steps in every run of a
    # seed, resumed or not (chunks timed to CHUNK_SECONDS would follow the machine's load).
    plan.setdefault("chunk_seconds", None if run.runtime == "local" else CHUNK_SECONDS)
    tiers = rl.cache_tiers_plan()
    return Plan(algo=algo, label=rl.env, initial_params=lambda: FlatParams(net).get(), evaluation=evaluation,
                budget=Budget(rl.total_steps, "env_steps"), stop_at_target=rl.stop_at_target,
                train_target=rl.target() if rl.target_on == "train100" else None,
                metrics=metrics + (INFERENCE_METRICS if central else ()) + cache_metrics(tiers, cache_readers),
                config=record,
                network_fn=network_fn, param_cache=tiers, **plan)


class QLearningSettings(Protocol):
    """The settings of a Q-learner that DQN's and Ape-X's configs share."""

    @property
    def loss(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def target_update(self) -> TargetUpdate: ...
    @property
    def max_grad_norm(self) -> float | None: ...


def q_learner(network_fn: Callable[[], nn.Module], settings: QLearningSettings, rl: RLConfig, runtime: str,
              outlier_k: float | None = None) -> Callable[[], QLearner]:
    """The factory of a :class:`QLearner` (built in the learner's process, on ``--device``)."""
    return functools.partial(QLearner, network_fn, loss=settings.loss, target=settings.target,
                             target_update=settings.target_update, outlier_k=outlier_k,
                             max_grad_norm=settings.max_grad_norm, device=resolve_device(rl.device, runtime=runtime),
                             copy_ahead=rl.device_copy == "async")


def q_actor(envs: EnvSpec, network_fn: Callable[[], nn.Module], exploration: ExplorationSchedule,
            returns: NStepReturns, *, seed: int, inference: ServiceEndpoint | None,
            timeout_s: float, numpy_network: NumpyNetwork | None = None) -> QActorSpec | CentralQActorSpec:
    """An ε-greedy Q-actor: its own network copy, or (given the ``inference`` server's endpoint)
    a rollout worker whose greedy actions the server chooses. Given ``numpy_network``, the
    network's unset numpy twin (:func:`gorila.nets.q.numpy_q_network`), the copy is the twin and
    the actor's process never imports torch: the spec then leaves ``network_fn`` out, as unpickling
    it would import its module, and torch with it."""
    if inference is not None:
        return CentralQActorSpec(envs, inference, exploration, returns, seed=seed, timeout_s=timeout_s)
    return QActorSpec(envs, shipped_network_fn(network_fn, numpy_network), exploration, returns, seed=seed,
                      numpy_network=numpy_network)


def shipped_network_fn(network_fn: Callable[[], nn.Module], twin: NumpyNetwork | None
                       ) -> Callable[[], nn.Module] | None:
    """What a plan sends an actor as its ``network_fn`` (segment actors, Q-actors): None where the
    actor gets the network's numpy ``twin``, because Ray unpickles every argument in the actor's
    process, and unpickling a function that builds a torch network imports torch there (seconds of
    CPU, and its memory)."""
    return None if twin is not None else network_fn


@dataclass(frozen=True)
class ReplayTopology:
    """Actors → replay shards → learners (DQN's global replay, Ape-X)::

        actor k ──add──► replay shard k % S ◄──sample (prefetched)── learner j
           ▲ pull                                                        │ push
           └────────────────────── parameter server ◄────────────────────┘

    ``refresh_every``: actor steps between pulls (None: a central actor, which holds no network).
    ``prioritized``: the shards sample by priority, actors send initial priorities from their own
    network (a central actor has none: its rows enter with the largest priority so far).
    ``actor_nice`` lowers the actors' scheduling priority, so that they yield the CPU to the
    learners they feed. ``by_node`` places actor k on the node of the shard it writes to.
    ``learner_gpus``: each learner's share of a GPU (:meth:`RLConfig.gpu_shares`).
    """

    routing: ShardedReplaySpec
    actors: int
    learners: int
    steps_per_add: int
    refresh_every: int | None
    batch_size: int
    learning_starts: int
    prefetch: int = 1
    prioritized: bool = False
    actor_nice: int = 0
    by_node: bool = False
    learner_gpus: float = 0.0

    @property
    def processes(self) -> int:
        """Processes of the topology: actors, learners and replay shards."""
        return self.actors + self.learners + self.routing.num_shards

    def service(self) -> ServiceSpec:
        """The replay shards."""
        return ServiceSpec("replay", self.routing.build, self.routing.num_shards,
                           node_of=self.routing.node_of_shard if self.by_node else None)

    def groups(self, actor: Callable[[dict], QActorSpec | CentralQActorSpec], learner: Callable[[], QLearner],
               services: dict[str, list[ServiceEndpoint]]) -> list[WorkerSpec]:
        """The actor and learner groups, given the plan's services by name; ``actor(services)`` is
        the spec of every actor (it may name the inference server)."""
        replay: list[ReplayClient] = [RemoteReplay(endpoint) for endpoint in services["replay"]]
        spec = actor(services)
        actors = functools.partial(ReplayActor, actor=spec, replay=replay, routing=self.routing,
                                   steps_per_add=self.steps_per_add, refresh_every=self.refresh_every,
                                   prioritized=self.prioritized and isinstance(spec, QActorSpec))
        learners = functools.partial(ReplayLearner, learner=learner, replay=replay, batch_size=self.batch_size,
                                     learning_starts=self.learning_starts, prefetch=self.prefetch,
                                     prioritized=self.prioritized)
        return [WorkerSpec("actor", actors, self.actors, nice=self.actor_nice,
                           node_of=self.routing.shard_of if self.by_node else None),
                WorkerSpec("learner", learners, self.learners, gpus=self.learner_gpus)]


#: The service group of the trajectory queues (IMPALA, PPO): one queue per learner.
QUEUES = "trajectories"
#: Where a segment actor's time goes, microseconds per env step (its report's parts): metrics of
#: IMPALA's and PPO's runs, beside each part's cost alone in ``gorila bench pipeline``.
ACTOR_TIME = ("actor.act_us", "actor.env_us", "actor.pull_us", "actor.send_us")


def learner_factory(learner: Callable[..., Any], run: RunConfig, spec: ServerSpec, learners: int) -> Callable[..., Any]:
    """The learner group's factory: ``learner`` on the server's shards; with ``--server learner``,
    ``learner`` on parameters it owns, publishing them to the shards (:mod:`gorila.params.owned`);
    with several learners (``spec``'s placement is then ``replicas``), each on a replica, their
    gradients averaged by an all-reduce (:mod:`gorila.params.replicas`)."""
    publication = run.publication()
    if publication is None:
        return learner
    if learners == 1:
        return functools.partial(owning_learner, learner, spec, publication)
    # The group's mean is one push to each replica: its rule is one learner's (a barrier's
    # aggregate of N pushes would wait for N rounds).
    one = replace(spec, rule=run.rule(num_workers=1))
    return functools.partial(replicated_learner, learner, one, publication, learners)


def owned_learners(groups: list[WorkerSpec], run: RunConfig, spec: ServerSpec, learners: int) -> list[WorkerSpec]:
    """``groups`` with the learner group's factory given to :func:`learner_factory`."""
    return [replace(group, factory=learner_factory(group.factory, run, spec, learners)) if group.name == "learner"
            else group for group in groups]


def check_sync_learners(run: RunConfig, learners: int) -> None:
    """Several queue-fed learners under a barrier need the local runtime: in processes of their own a
    learner whose queue ran dry ends its chunk with fewer pushes, and another waits at the barrier
    for a push that never comes in time (see :class:`~gorila.agents.impala.learner.ImpalaLearner`)."""
    if run.rule(num_workers=learners).barrier and learners > 1 and run.runtime != "local":
        raise ConfigError("learners", "--mode sync with several learners runs on --runtime local only; "
                                      "use one learner (it takes every actor's segments) or --mode async")


def trajectory_groups(actor: Callable[..., Any], learner: Callable[..., Any], actors: int, learners: int,
                      central: bool, learner_gpus: float = 0.0
                      ) -> Callable[[dict[str, list[ServiceEndpoint]]], list[WorkerSpec]]:
    """A plan's ``groups`` for actors → trajectory queues → learners (IMPALA, PPO)::

        groups = trajectory_groups(actor, learner, cfg.actors, cfg.learners, central)
        services = (ServiceSpec(QUEUES, queue, cfg.learners), *inference)

    Every actor is given every queue (``queues=``) and, with central inference, the run's
    inference server (``inference=``); learner j is given the queues and takes from queue j, and
    asks the runtime for ``learner_gpus`` of a GPU (learners on ``--device cuda``). The actors run
    at :data:`ACTOR_NICE`."""
    def groups(services: dict[str, list[ServiceEndpoint]]) -> list[WorkerSpec]:
        queues = [RemoteQueue(endpoint) for endpoint in services[QUEUES]]
        inference = services[INFERENCE][0] if central else None
        return [WorkerSpec("actor", functools.partial(actor, queues=queues, inference=inference), actors,
                           nice=ACTOR_NICE),
                WorkerSpec("learner", functools.partial(learner, queues=queues), learners, gpus=learner_gpus)]
    return groups
