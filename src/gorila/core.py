"""The roles every algorithm is built from, and the seams between them.

Each role is a small Protocol; the classes that play it are plain Python objects, testable in one
process. A runtime (:mod:`gorila.runtime`) places them: all in this process, or as Ray workers.

=====================  ==================================================================
role                   played by
=====================  ==================================================================
:class:`Actor`         ``actors.QActor``, ``actors.rollout.CentralQActor``: steps
                       environments, emits experience tagged with the ``policy_version`` it
                       acted with; its :class:`Tally` (``actors.ExperienceTally``) counts it
:class:`ActorSpec`     ``actors.QActorSpec``, ``actors.rollout.CentralQActorSpec``: builds an
                       actor in its worker's process
:class:`Learner`       ``learners.QLearner``: turns a batch into a gradient on given parameters
:class:`ParamSource`   ``params.ParameterClient`` or ``params.cache.CachedSource`` (its node's
                       cache): where an actor gets its parameters
:class:`ReplayClient`  ``replay.RemoteReplay``: typed calls to one replay shard, wherever it lives
:class:`Worker`        anything the driver steps in chunks: a bundle, an actor or learner
                       worker, an A3C or lstsq worker, the evaluator
:class:`Runtime`       ``runtime.LocalRuntime``, ``runtime.ray_runtime.RayRuntime``
=====================  ==================================================================

The workers that compose roles (``Bundle``, ``ReplayActor``, ``ReplayLearner``) are typed on
them, not on the classes that play them, and ``make test`` type-checks the roles against those
classes (``tests/unit/test_roles.py``), so a class that stops playing its role fails the suite.
Calls that may cross a process return a :class:`~gorila.reply.Pending` (:mod:`gorila.reply`, a
leaf every layer imports). A *service* (a replay shard) is hosted by the runtime and only called
by others: nothing steps it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from gorila.reply import Pending, ServiceEndpoint

if TYPE_CHECKING:  # annotations only: importing these here would make every role import them
    from pathlib import Path

    import gymnasium as gym

    from gorila.envs.spec import EnvSpec
    from gorila.params.server import ParameterServer, ServerSpec
    from gorila.params.shard_stats import ShardStats
    from gorila.params.tiers import CacheTiers
    from gorila.types import Batch, Transitions


class ParamSource(Protocol):
    """Where an actor gets the parameters it acts with: the server (a ``ParameterClient``) or its
    node's cache (``params.cache.CachedSource``); the actor's code is the same either way::

        w = source.params()     # a copy it already holds (fetched on first use)
        w = source.pull()       # the newest there is
        source.version          # the version of what it holds: tag experience with it
    """

    @property
    def version(self) -> int: ...
    def params(self) -> np.ndarray: ...
    def pull(self) -> np.ndarray: ...


class Tally(Protocol):
    """What an actor has played so far, as its worker reports it (``actors.ExperienceTally``)::

        report = actor.tally.report()     # {"env_steps": ..., "episodes": ..., "recent_returns": [...]}
        actor.tally.env_steps             # the steps alone (benchmarks rate them)
    """

    @property
    def env_steps(self) -> int: ...
    def report(self) -> dict[str, Any]: ...


class Actor(Protocol):
    """Steps its environments with a policy it was given::

        actor.load(source.params(), source.version)
        rows = actor.act()                # one step: the replay rows it completed (tagged with
                                          # policy_version), or None
        priorities = actor.priorities(rows)  # initial replay priorities, None: the shard's largest
        actor.tally.report()              # env steps, episodes, recent returns
        actor.version, actor.epsilon, actor.env_failures   # what its worker reports beside them
        actor.close()
    """

    @property
    def tally(self) -> Tally: ...
    @property
    def version(self) -> int: ...
    @property
    def epsilon(self) -> float: ...
    @property
    def env_failures(self) -> int: ...
    @property
    def observation_space(self) -> gym.Space[Any]: ...
    def load(self, params: np.ndarray, version: int) -> None: ...
    def act(self) -> Transitions | None: ...
    def priorities(self, rows: Transitions) -> np.ndarray | None: ...
    def close(self) -> None: ...


class ActorSpec(Protocol):
    """How a worker builds its actor in its own process (small and picklable: ``QActorSpec``,
    ``CentralQActorSpec``)::

        actor = spec.build(index=worker_id)
        spec.envs.num_envs, spec.seed
    """

    @property
    def envs(self) -> EnvSpec: ...
    @property
    def seed(self) -> int: ...
    def build(self, index: int) -> Actor: ...


class Learner(Protocol):
    """Turns a batch of experience into a gradient on the parameters it is given::

        grad, info = learner.gradient(client.params(), client.version, batch)
        if grad is not None:              # None: the learner chose to skip this batch
            client.push(grad)
        learner.skipped_outliers          # how many it skipped so far (its worker reports it)
    """

    @property
    def skipped_outliers(self) -> int: ...
    def gradient(self, params: np.ndarray, version: int, batch: Any) -> tuple[np.ndarray | None, dict[str, Any]]: ...


class ReplayClient(Protocol):
    """One replay shard as its users see it; every call returns a :class:`Pending`::

        replay.add(rows, writer="actor-3", seq=12, priorities=p).result(timeout_s)  # rows stored, None: wait
        replay.ready(learner=0, step=7, min_size=500).result(timeout_s)           # may learner 0 sample?
        batch = replay.sample(32).result(timeout_s)                                # None: wait, ask again
        replay.update_priorities(batch.indices, td_errors)
        replay.size().result(timeout_s); replay.stats().result(timeout_s)

    A shard never blocks a call: when its rate limiter holds an add or a sample back it answers
    None, and the caller waits (with a timeout that ends in a clear error) and asks again.
    """

    def add(self, transitions: Transitions, writer: str, seq: int,
            priorities: np.ndarray | None = None) -> Pending[int | None]: ...
    def sample(self, batch_size: int) -> Pending[Batch | None]: ...
    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> Pending[None]: ...
    def size(self) -> Pending[int]: ...
    def stats(self) -> Pending[dict[str, Any]]: ...
    def ready(self, learner: int, step: int, min_size: int) -> Pending[bool]:
        """Whether ``learner`` may sample at its step ``step``: every learner gets the same answer
        for the same step, once the shard holds ``min_size`` rows."""


class Worker(Protocol):
    """What the driver steps in chunks: an Actor, a Learner, a Bundle, an lstsq worker."""

    def step(self) -> bool | None:
        """One iteration (e.g. compute a gradient and push it). ``False`` says the worker could not
        make progress because it waits on another component (a replay's rate limiter): the runtime
        then gives the others the CPU — a Ray worker backs off briefly, the local runtime ends this
        worker's chunk early. A worker never sleeps itself."""

    def report(self) -> dict[str, Any]:
        """Cumulative counters since the worker was built (small, JSON-like)."""


#: Builds a worker inside its own process: ``factory(worker_id, server)``. Factories are small and
#: picklable (``functools.partial`` of a class with explicit arguments); the worker builds its
#: envs and networks where it runs, and a restarted worker is rebuilt the same way.
WorkerFactory = Callable[[int, "ParameterServer"], Worker]

#: Builds a service object inside its process: ``factory(service_id)``.
ServiceFactory = Callable[[int], Any]



class WorkerGroup(Protocol):
    """Workers of one kind, run together."""

    def run_steps(self, steps: int, seconds: float | None = None) -> list[dict[str, Any]]:
        """Every worker takes ``steps`` steps, or fewer once ``seconds`` have passed since its chunk
        began (the step under way finishes); returns each worker's ``report()``, which says
        ``chunk_cut_after`` (the steps it took) when the time ended its chunk."""

    def start_steps(self, steps: int, seconds: float | None = None) -> list[Pending[dict[str, Any]]]:
        """Like :meth:`run_steps` without waiting: one pending report per worker."""

    def reports(self) -> list[dict[str, Any]]:
        """Every worker's ``report()`` now (with ``pid`` where there are processes)."""

    def call(self, method: str, *args: Any) -> list[Any]:
        """Call ``method`` on every worker object and return the results in worker order."""

    def kill(self, index: int) -> None:
        """End worker ``index``'s process as a crash would, so the runtime starts it again."""


class ServiceGroup(Protocol):
    """Services of one kind (e.g. the replay shards)::

        replies = group.stats()                    # asked of every service at once
        stats = [r.result(timeout_s) for r in replies]
        group.save()                               # each saves its state where it lives
    """

    def endpoints(self) -> list[ServiceEndpoint]: ...
    def call(self, method: str, *args: Any) -> list[Any]: ...
    def stats(self) -> list[Pending[dict[str, Any]]]:
        """Every service's ``stats()`` (with ``pid``, which tells a restarted one), a reply each."""
    def save(self) -> None:
        """Every service's ``save()``; returns once all have saved."""


class ShardGroup(Protocol):
    """The placed shards of one parameter server."""

    server: ParameterServer  # how workers reach these shards

    def pull(self) -> tuple[np.ndarray, list[int]]:
        """The whole flat parameter vector and each shard's version."""

    def stats(self) -> list[ShardStats]: ...
    def state_dict(self) -> dict[str, np.ndarray]: ...
    def load_state_dict(self, state: dict[str, np.ndarray]) -> None: ...
    def cpu_seconds(self) -> float: ...
    def restarts(self) -> list[str]:
        """A sentence for each shard restarted since the last call (none where shards never restart)."""


class Runtime(Protocol):
    """Where components run: ``LocalRuntime`` (one process) or ``RayRuntime``::

        runtime = make_runtime("ray")                       # or "local"
        runtime.plan(processes=5)                           # share the CPUs among 5 processes
        shards = runtime.start_shards(spec, initial_params, wait=False)
        replay = runtime.start_services(replay_factory, count=2, name="replay", wait=False)
        workers = runtime.start_workers(factory, 4, shards.server, name="bundle", wait=False)
        runtime.wait_started()                              # the processes started side by side
        reports = workers.run_steps(10)
        runtime.shutdown()

    ``wait=True`` (the default) waits for that group's processes at once. ``node_of(k)`` pins
    member ``k`` of a group to the node of that index (modulo the nodes, in a fixed order);
    ``spread`` spreads a worker group's members over the nodes as far as they have room.
    ``gpus`` is the share of a GPU each member's process asks for (a learner or an inference
    server on ``--device cuda``): a runtime over a cluster places it on a node with GPUs.
    """

    name: str
    call_timeout_s: float  # how long a call on a process may take; the driver sets it once the plan's chunks are known

    def plan(self, processes: int, caches: CacheTiers | None = None) -> None:
        """Share the CPUs among ``processes`` processes, leaving room for the parameter caches
        ``caches`` names (each node's, and a rack's)."""
    def start_shards(self, spec: ServerSpec, params: np.ndarray, *, wait: bool = True,
                     checkpoints: Path | None = None) -> ShardGroup:
        """The shards; with ``checkpoints`` (the run's), a runtime that restarts processes brings a
        dead shard back from the newest good checkpoint there."""
    def start_param_caches(self, server: ParameterServer, tiers: CacheTiers = ...,
                           wait_s: float = ...) -> tuple[ParameterServer, dict[str, ServiceGroup]]:
        """A parameter cache on every node (and one per rack between them and the server, as
        ``tiers`` says); the server whose ``source()`` reads the node caches, and each tier's group."""
    def start_services(self, factory: ServiceFactory, count: int, *, name: str,
                       wait: bool = True, node_of: Callable[[int], int] | None = None,
                       gpus: float = 0.0) -> ServiceGroup: ...
    def start_workers(self, factory: WorkerFactory, count: int, server: ParameterServer, *,
                      name: str, nice: int = 0, wait: bool = True,
                      node_of: Callable[[int], int] | None = None, gpus: float = 0.0,
                      spread: bool = False) -> WorkerGroup: ...
    def wait_started(self) -> None: ...
    def wait(self, pending: list[Pending[Any]], timeout_s: float) -> list[int]:
        """Block until at least one of ``pending`` is ready (or ``timeout_s`` passed); the indices of
        those ready."""

    def cpu_seconds(self) -> float: ...
    def shutdown(self) -> None: ...
