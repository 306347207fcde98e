"""What an algorithm's builder hands the driver: a :class:`Plan`.

The driver knows no algorithm. A builder (``gorila.agents.<name>.builder``) reads its config once
and describes the run as plain data: the parameter server, the services, the worker groups built
from small factories, how progress is judged (an :class:`Evaluation`) and the budget::

    plan = Plan(algo="a3c", label="CartPole-v1", initial_params=lambda: FlatParams(net).get(),
                spec=ServerSpec(rule=UpdateRule.asynchronous()),
                groups=lambda services: [WorkerSpec("worker", factory, count=2)],
                evaluation=PolicyEvaluation(...), budget=Budget(1_000_000, "env_steps"))
    summary = run(run_config, plan)

What the driver placed of it is a :class:`Placed`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from gorila import validate
from gorila.core import Runtime, ServiceFactory, ServiceGroup, ShardGroup, WorkerFactory, WorkerGroup
from gorila.params import ParameterServer, ServerSpec
from gorila.params.tiers import CacheTiers
from gorila.reply import Pending, ServiceEndpoint


@dataclass(frozen=True)
class WorkerSpec:
    """A group of ``count`` workers built by ``factory(worker_id, server)`` in their processes.
    ``nice`` lowers their processes' scheduling priority (Ray runtime): background producers such
    as Ape-X actors yield the CPU to the learner they feed when cores are scarce. ``node_of(k)``
    places worker ``k`` on that node (an index into the cluster's nodes, modulo their number; None:
    wherever Ray likes; ``spread``: spread over the nodes as far as they have room, unpinned).
    ``gpus``: the share of a GPU each worker's process asks for (learners on ``--device cuda``; the
    Ray runtime places them on nodes with GPUs)."""

    name: str
    factory: WorkerFactory
    count: int
    nice: int = 0
    node_of: Callable[[int], int] | None = None
    gpus: float = 0.0
    spread: bool = False


@dataclass(frozen=True)
class ServiceSpec:
    """A group of ``count`` services (e.g. replay shards) built by ``factory(service_id)``; with
    ``uses_server`` by ``factory(service_id, server=parameter_server)`` (an inference server pulls
    the parameters it serves). Placed as :class:`WorkerSpec` places workers (``node_of``, ``gpus``:
    an inference server on ``--inference-device cuda``)."""

    name: str
    factory: Callable[..., Any]  # a ServiceFactory, taking ``server=`` as well with uses_server
    count: int
    node_of: Callable[[int], int] | None = None
    uses_server: bool = False
    gpus: float = 0.0

    def bound(self, server: ParameterServer) -> ServiceFactory:
        """The factory the runtime builds each service with."""
        return functools.partial(self.factory, server=server) if self.uses_server else self.factory


@dataclass(frozen=True)
class Budget:
    """How much a run may do: ``total`` env steps (RL) or server updates (lstsq)."""

    total: int
    unit: Literal["env_steps", "updates"]

    def __post_init__(self) -> None:
        validate.choice("unit", self.unit, ("env_steps", "updates"))


@dataclass(frozen=True)
class Score:
    """One judgement of the server's parameters.

    ``value`` is what the run is judged by (an evaluation return, or a loss's suboptimality),
    ``reached`` whether it meets the target, ``row`` the metrics columns it fills, ``record``
    what ``summary.json`` keeps of it (``evaluations``), ``message`` the line shown. ``at`` is
    where the judged parameters were taken, as :meth:`Evaluation.before_chunk` was told it
    (``{unit: used, "train_time_s": seconds}``; None: where the judgement came in). ``params`` are
    the judged parameters when the judgement is the best so far, for the run's ``best``
    checkpoint, with ``best_meta`` what that checkpoint records of how they were judged and
    ``statistics`` the normalisation statistics they were judged with (checkpoint arrays).
    """

    value: float
    reached: bool
    row: dict[str, float | None] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)
    message: str | None = None
    at: dict[str, float] | None = None
    params: np.ndarray | None = None
    best_meta: dict[str, Any] = field(default_factory=dict)
    statistics: dict[str, np.ndarray] = field(default_factory=dict)


class Evaluation(Protocol):
    """How the driver judges the parameters while a run trains::

        evaluation.start(runtime, shards, groups, stall_s)  # once everything runs; stall_s: how long
                                                     # a judgement of its own process may go unanswered
        evaluation.before_chunk(now)                 # may start a judgement in parallel; now:
                                                     # {unit: used, "train_time_s": seconds}
        score = evaluation.after_chunk()             # a finished judgement, or None
        evaluation.awaited()                         # replies the driver's wait for a chunk also ends on
        evaluation.finish(within_s)                  # the last one in flight (given within_s), or None
        evaluation.state_dict()                      # what a checkpoint keeps (JSON-like)

    ``columns`` are the metrics columns it fills, its headline first (shown beside the progress
    bar); ``target`` the value that counts as reached (for ``summary.json``); ``summary()`` its
    own summary fields; ``restarts`` how often a process of its own (an evaluator worker) was
    restarted, which the run counts among its ``worker_restarts``.
    """

    @property
    def columns(self) -> tuple[str, ...]: ...
    @property
    def target(self) -> float | None: ...
    @property
    def restarts(self) -> int: ...

    def start(self, runtime: Runtime, shards: ShardGroup, groups: dict[str, WorkerGroup],
              stall_s: float | None = None) -> None: ...
    def before_chunk(self, now: dict[str, float]) -> None: ...
    def after_chunk(self) -> Score | None: ...
    def awaited(self) -> list[Pending[Any]]: ...
    def finish(self, within_s: float | None = None) -> Score | None: ...
    def summary(self) -> dict[str, Any]: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class Plan:
    """One run, as the driver needs it (see the module doc).

    ``groups(services)`` receives the services' endpoints by name and returns the worker groups.
    Workers report cumulative counters; the driver sums ``env_steps``, ``episodes`` and
    ``pushes_rejected_outlier`` over them (restarts included) and averages ``recent_returns`` and
    ``loss``. ``processes`` is how many processes share the CPUs (workers and services; the
    driver adds the shards and the evaluation). ``chunk_steps(updates)`` is how many steps every
    worker takes in the next chunk; with ``chunk_seconds`` that is only the first chunk's size, and
    each group's chunks then grow or shrink to last about that long (the driver's calls between
    chunks, and the wait for a group's slowest worker, then cost a small share of the time).
    ``metrics`` are extra columns ``group.key``: a service's ``stats()[key]`` summed over its
    group, or a worker report's ``key`` averaged over its group; ``histograms`` are report keys
    holding ``{value: count}``, summed into ``summary.json``. ``checkpoint_services`` name service
    groups whose ``save()`` runs at every checkpoint (each service writes its own state where it
    lives). With ``param_cache`` (its :class:`~gorila.params.tiers.CacheTiers`) every node gets a
    parameter cache (:mod:`gorila.params.cache`), and with a rack tier every rack one that its
    nodes' caches read: service groups ``param_cache`` and ``rack_cache`` whose stats can be
    metrics; workers' ``server.source()``
    reads it. ``train_target`` (RL, ``--target-on train100``) judges the target on training
    instead of by the evaluation: the mean return of the run's latest 100 episodes, once 100 have
    been played. ``config`` is written to ``config.json``. ``network_fn`` (RL) builds the network
    whose parameters the server holds: checkpoints then also export its named ``state_dict``, which
    plain PyTorch can load.
    With ``snapshot`` a checkpoint of the local runtime also holds its workers and services as they
    are (:mod:`gorila.driver.exact`), so that ``--resume`` goes on exactly as the run would have;
    replay plans set it only with ``--checkpoint-replay`` (their replay is most of that state).
    ``normalized`` names the worker groups that normalise observations or rewards
    (:mod:`gorila.envs.normalize`): the driver merges the statistics their reports carry, hands the
    run's back to them before each chunk (``normalize_with``) and saves them in every checkpoint
    (:mod:`gorila.driver.normalization`).
    """

    algo: str
    label: str  # names the run directory: the env id, or what the data is
    initial_params: Callable[[], np.ndarray]
    spec: ServerSpec
    groups: Callable[[dict[str, list[ServiceEndpoint]]], list[WorkerSpec]]
    evaluation: Evaluation
    budget: Budget
    processes: int
    services: tuple[ServiceSpec, ...] = ()
    chunk_steps: Callable[[int], int] = lambda updates: 50
    chunk_seconds: float | None = None
    stop_at_target: bool = True
    train_target: float | None = None
    metrics: tuple[str, ...] = ()
    histograms: tuple[str, ...] = ()
    checkpoint_services: tuple[str, ...] = ()
    config: dict = field(default_factory=dict)
    network_fn: Callable[[], Any] | None = None
    param_cache: CacheTiers | None = None
    snapshot: bool = True
    normalized: tuple[str, ...] = ()


@dataclass(frozen=True)
class Placed:
    """What the driver placed of a plan, and its evaluations so far, as ``on_chunk`` sees it after
    every row (tests, tools)::

        def on_chunk(placed):
            params, versions = placed.shards.pull()
            placed.groups["bundle"].kill(0)        # Ray runtime: crash a worker
            return placed.evaluations[-1]["eval_return"] < 200 if placed.evaluations else None  # False: stop

    ``evaluations`` are the records ``summary.json`` keeps, oldest first (read them, do not change them).
    """

    shards: ShardGroup
    services: dict[str, ServiceGroup]
    groups: dict[str, WorkerGroup]
    evaluations: list[dict[str, Any]] = field(default_factory=list)
