"""The Ray runtime: shards and workers as Ray processes; the only module that imports Ray.

With neither ``address`` nor ``RAY_ADDRESS`` it starts an embedded Ray on this machine,
bound to loopback with no dashboard; otherwise it joins that cluster.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import logging
import os
import socket
import time
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gorila.core import Pending, ServiceFactory, WorkerFactory
from gorila.errors import ClusterUnreachableError, ConfigError, GorilaError, SchedulingError, WorkerTimeoutError
from gorila.metrics.cputime import CpuClock, process_cpu_seconds
from gorila.params import (ParameterServer, ParameterShard, PushResult, ServerSpec, ShardStats, shard_state,
                           split_shard_state)
from gorila.runtime.allreduce import SpreadShards
from gorila.runtime.placement import alive_nodes, pinned
from gorila.runtime.shard_host import ShardHost
from gorila.runtime.shm import FastPathChannel, FastPathServer

# Must be in the environment before Ray starts: then every Ray socket binds to 127.0.0.1.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import ray  # noqa: E402
from ray.exceptions import GetTimeoutError, RayActorError  # noqa: E402

# One BLAS / torch thread per process (torch reads OMP_NUM_THREADS when it is imported): parallelism
# comes from processes, and oversubscribed threads would make every speedup measurement lie.
_ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
# A blocked worker's backoff, doubling from the first to the last.
_BACKOFF_S = (0.001, 0.02)


class RayPending:
    """A reply on its way from a Ray worker."""

    def __init__(self, ref: ray.ObjectRef, what: str):
        self.ref, self.what = ref, what

    def result(self, timeout_s: float) -> Any:
        try:
            return ray.get(self.ref, timeout=timeout_s)
        except GetTimeoutError as err:
            raise WorkerTimeoutError(f"{self.what} did not answer within {timeout_s:.0f} s") from err

    def ready(self) -> bool:
        done, _ = ray.wait([self.ref], timeout=0)
        return bool(done)


@ray.remote
class _ShardProcess:
    """Hosts one :class:`ParameterShard` behind a :class:`ShardHost`. Ray methods run on the
    actor's asyncio loop, so a barrier push awaits the version that completes it while the other
    workers' pushes keep arriving; same-node clients are served on threads of the fast path
    (:mod:`gorila.runtime.shm`). Every update, from either side, wakes the loop's waiters."""

    def __init__(self, barrier_timeout_s: float):
        self.cpu = CpuClock()
        self.barrier_timeout_s = barrier_timeout_s
        self.host: ShardHost | None = None
        self.fast_path: FastPathServer | None = None
        self.fast_path_path: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loaded = asyncio.Event()  # calls that need the shard wait for it: they may come first
        self._next_version = asyncio.Event()  # set (and replaced) whenever the version moves on
        self._waiting = 0  # Ray pushes waiting at the barrier (changed on the loop only)

    async def load(self, shard: ParameterShard) -> str:
        """Take the shard and start serving same-node clients; returns this node's id."""
        self._loop = asyncio.get_running_loop()
        # Arrays that arrive through Ray's object store are read-only views: own a copy.
        self.host = ShardHost(copy.deepcopy(shard), self.barrier_timeout_s, on_advance=self._advanced)
        self.fast_path = FastPathServer(self.host.push, self.host.pull, self.host.size)
        self.fast_path_path = self.fast_path.start()
        self._loaded.set()
        return ray.get_runtime_context().get_node_id()

    async def fast_path_address(self) -> FastPathAddress | None:
        """Where same-node clients reach this shard without Ray calls (None where unsupported)."""
        await self._loaded.wait()
        if self.fast_path_path is None:
            return None
        return FastPathAddress(ray.get_runtime_context().get_node_id(), self.fast_path_path, self.host.size)

    def _advanced(self) -> None:
        # Only when a Ray push waits: waking the loop for nothing would take the GIL from the
        # fast path's threads on every update.
        if self._waiting:
            self._loop.call_soon_threadsafe(self._wake_waiters)

    def _wake_waiters(self) -> None:
        event, self._next_version = self._next_version, asyncio.Event()
        event.set()

    async def push(self, grad: np.ndarray, version: int, worker_id: int) -> PushResult:
        await self._loaded.wait()
        result = self.host.push(grad, version, worker_id, wait=False)
        if not self.host.must_wait(result, version):
            return result
        deadline = self._loop.time() + self.barrier_timeout_s
        self._waiting += 1  # before the version check: an update after it then wakes this loop
        try:
            while self.host.version <= version:
                # Nothing runs on this loop between the check and the wait: the event taken
                # here is set by the next version, whichever thread makes it.
                await asyncio.wait_for(self._next_version.wait(), deadline - self._loop.time())
        except asyncio.TimeoutError as err:
            raise self.host.barrier_timeout(version, worker_id) from err
        finally:
            self._waiting -= 1
        return self.host.refreshed(result)

    async def pull(self) -> tuple[np.ndarray, int]:
        await self._loaded.wait()
        return self.host.pull()

    async def version(self) -> int:
        await self._loaded.wait()
        return self.host.version

    async def stats(self) -> ShardStats:
        await self._loaded.wait()
        with self.host.locked() as shard:
            return copy.deepcopy(shard.stats)  # Ray pickles it after the lock is released

    async def state_dict(self) -> dict[str, np.ndarray]:
        await self._loaded.wait()
        with self.host.locked() as shard:
            return shard.state_dict()

    async def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        await self._loaded.wait()
        with self.host.locked() as shard:
            shard.load_state_dict(state)

    def cpu_seconds(self) -> float:
        return self.cpu.seconds()

    def close_fast_path(self) -> None:
        if self.fast_path is not None:
            self.fast_path.close()


def check_reachable(address: str, source: str, timeout_s: float) -> None:
    """Raise :class:`ClusterUnreachableError` unless something accepts a connection at ``address``
    (``host:port`` or ``ray://host:port``) within ``timeout_s``; ``auto`` is left to Ray."""
    if address in ("auto", "local"):
        return
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():
        raise ClusterUnreachableError(f"{source} {address!r} is not a Ray address: expected HOST:PORT, "
                                      "e.g. 10.0.0.5:6379")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as err:
        raise ClusterUnreachableError(
            f"no Ray cluster answers at {address} (from {source}): {err.strerror or err}. Start one there "
            f"(ray start --head --port {port}), or leave out --address and RAY_ADDRESS to run on an "
            "embedded Ray on this machine") from None


@dataclass(frozen=True)
class FastPathAddress:
    """Where a shard process serves clients on its own node."""

    node_id: str
    path: str
    size: int


class _NamedActor:
    """A Ray actor handle that travels by name.

    Ray keeps a restartable actor's creation arguments for its restarts; actor handles among
    them count as objects in the object store, which Ray cannot promise to keep (ray-project/ray
    issue 53727). Endpoints therefore carry the actor's name, and a copy in another process
    looks the actor up on first use. Calls go straight to the handle::

        actor = _NamedActor(handle, "gorila-1a2b3c4d-shard-0")
        actor.push.remote(grad, version, worker_id)
    """

    def __init__(self, handle: Any, name: str):
        self._handle, self.name = handle, name

    def __getstate__(self) -> dict:
        return {"name": self.name}

    def __setstate__(self, state: dict) -> None:
        self._handle, self.name = None, state["name"]

    @property
    def handle(self) -> Any:
        if self._handle is None:
            self._handle = ray.get_actor(self.name)
        return self._handle

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):  # copy and pickle probe dunders: not the actor's
            raise AttributeError(attr)
        return getattr(self.handle, attr)


class RayShardEndpoint:
    """A client's way to one shard process (picklable: workers receive it).

    With ``fast``, a process asks the shard for its fast-path address on first use (the shard
    may still be starting: the answer waits for it) and, on the shard's node, opens a
    :class:`~gorila.runtime.shm.FastPathChannel` and sends pushes and pulls through it;
    elsewhere, or once that channel fails, calls go through Ray::

        endpoint.push(grad, version, worker_id).result(timeout_s)   # -> PushResult
        endpoint.transport                                         # "shm" or "ray"
    """

    def __init__(self, handle: Any, shard_id: int, fast: bool = True, connect_timeout_s: float = 60.0):
        self.handle, self.shard_id, self.fast = handle, shard_id, fast
        self.fast_path: FastPathAddress | None = None
        self.connect_timeout_s = connect_timeout_s
        self._channel: FastPathChannel | None = None
        self._tried = False  # one attempt per process: a failed channel is not retried

    def __getstate__(self) -> dict:
        # A channel belongs to the process that opened it; a copy elsewhere opens its own.
        return {**self.__dict__, "_channel": None, "_tried": False, "fast_path": None}

    @property
    def transport(self) -> str:
        """``"shm"`` while this process's fast path is open, else ``"ray"``."""
        return "ray" if self._channel is None or self._channel.closed else "shm"

    def _fast(self) -> FastPathChannel | None:
        if not self._tried and self.fast:
            self._tried = True
            try:
                self.fast_path = ray.get(self.handle.fast_path_address.remote(), timeout=self.connect_timeout_s)
            except GetTimeoutError as err:
                raise WorkerTimeoutError(f"shard {self.shard_id} did not start within "
                                         f"{self.connect_timeout_s:.0f} s") from err
            if self.fast_path is not None and ray.get_runtime_context().get_node_id() == self.fast_path.node_id:
                try:
                    self._channel = FastPathChannel(self.fast_path.path, self.fast_path.size, self.shard_id,
                                                    self.connect_timeout_s)
                except OSError:  # e.g. the socket is gone: the Ray calls still reach the shard
                    self._channel = None
        return None if self.transport == "ray" else self._channel

    def connect(self) -> None:
        """Look up the shard's fast path and, on its node, open the channel."""
        self._fast()

    def push(self, grad: np.ndarray, version: int, worker_id: int) -> Pending:
        channel = self._fast()
        pending = channel.push(grad, version, worker_id) if channel is not None else None
        return pending or RayPending(self.handle.push.remote(grad, version, worker_id),
                                     f"shard {self.shard_id} push")

    def pull(self) -> Pending:
        channel = self._fast()
        pending = channel.pull() if channel is not None else None
        return pending or RayPending(self.handle.pull.remote(), f"shard {self.shard_id} pull")

    def version(self) -> Pending:
        """The shard's version through a Ray call (no payload): a cache's probe."""
        return RayPending(self.handle.version.remote(), f"shard {self.shard_id} version")

    def close(self) -> None:
        """Close this process's fast path (later calls go through Ray)."""
        self._tried = True
        if self._channel is not None:
            self._channel.close()


class RayService:
    """Calls a method of the object hosted by a service process (picklable)."""

    def __init__(self, handle: Any, what: str):
        self.handle, self.what = handle, what

    def call(self, method: str, *args: Any) -> RayPending:
        return RayPending(self.handle.call.remote(method, *args), f"{self.what}.{method}")


@ray.remote
class _ServiceProcess:
    """Hosts one service object (a replay shard), built here from its factory; others call it."""

    def __init__(self, factory: ServiceFactory, service_id: int):
        self.cpu = CpuClock()
        self.service = factory(service_id)

    def ready(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def call(self, method: str, *args: Any) -> Any:
        return getattr(self.service, method)(*args)


@ray.remote
class _WorkerProcess:
    """Hosts one worker object, built here from its factory (never from large arguments, so a
    restart rebuilds it the same way and it pulls fresh parameters before its first step)."""

    def __init__(self, factory: WorkerFactory, worker_id: int, server: ParameterServer, nice: int = 0):
        os.nice(nice)  # before the worker exists: its threads inherit the priority
        self.cpu = CpuClock()
        self.worker = factory(worker_id, server)
        self.first_step_at: float | None = None  # wall clock of the first step: start-up's end
        with warnings.catch_warnings():  # Ray deprecates an internal it calls here; the API stays
            warnings.simplefilter("ignore", DeprecationWarning)
            self.restarted = ray.get_runtime_context().was_current_actor_reconstructed

    def ready(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def run_steps(self, steps: int) -> dict[str, Any]:
        self.first_step_at = self.first_step_at or time.time()
        blocked = 0
        for _ in range(steps):
            if self.worker.step() is False:
                # Waiting on another process (a rate limiter): leave it the CPU, a little longer each time.
                time.sleep(min(_BACKOFF_S[0] * 2 ** blocked, _BACKOFF_S[1]))
                blocked += 1
            else:
                blocked = 0
        return self.report()

    def report(self) -> dict[str, Any]:
        return {**self.worker.report(), "cpu_s": self.cpu.seconds(), "restarted": self.restarted,
                "pid": os.getpid(), "first_step_at": self.first_step_at}

    def call(self, method: str, *args: Any) -> Any:
        return getattr(self.worker, method)(*args)


class RayShards:
    """The shard processes of one parameter server; ``server`` is how workers reach them."""

    def __init__(self, handles: list[Any], spec: ServerSpec, size: int, call_timeout_s: float):
        self.handles = handles
        self.layout = spec.layout(size)
        self.rule = spec.rule
        self.timeout_s = call_timeout_s
        self.server = self._server(fast=True)
        self.node_ids: list[str] = []

    def ray_call_server(self) -> ParameterServer:
        """The server reached through Ray calls only, even on the shards' node (for comparisons)."""
        return self._server(fast=False)

    def _server(self, fast: bool) -> ParameterServer:
        endpoints = tuple(RayShardEndpoint(h, i, fast, self.timeout_s) for i, h in enumerate(self.handles))
        return ParameterServer(endpoints, self.layout, self.rule, self.timeout_s)

    def close(self) -> None:
        """Close the fast paths: this process's channels, then the shards' sockets and dirs.
        A shard that already died has nothing left to close and is skipped."""
        for endpoint in self.server.endpoints:
            endpoint.close()
        refs = [h.close_fast_path.remote() for h in self.handles]
        _, unfinished = ray.wait(refs, num_returns=len(refs), timeout=self.timeout_s)
        if unfinished:
            raise WorkerTimeoutError(f"{len(unfinished)} shards did not close their fast path within "
                                     f"{self.timeout_s:.0f} s")

    def _get(self, refs: list, what: str) -> list:
        try:
            return ray.get(refs, timeout=self.timeout_s)
        except GetTimeoutError as err:
            raise WorkerTimeoutError(f"shards did not answer {what} within {self.timeout_s:.0f} s") from err

    def pull(self) -> tuple[np.ndarray, list[int]]:
        parts = self._get([h.pull.remote() for h in self.handles], "pull")
        return np.concatenate([p for p, _ in parts]), [v for _, v in parts]

    def stats(self) -> list[ShardStats]:
        return self._get([h.stats.remote() for h in self.handles], "stats")

    def state_dict(self) -> dict[str, np.ndarray]:
        return shard_state(self._get([h.state_dict.remote() for h in self.handles], "state_dict"))

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        parts = split_shard_state(state, len(self.handles))
        self._get([h.load_state_dict.remote(p) for h, p in zip(self.handles, parts)], "load_state_dict")

    def cpu_seconds(self) -> float:
        return float(sum(self._get([h.cpu_seconds.remote() for h in self.handles], "cpu_seconds")))


class _RayGroup:
    """Processes of one kind started together; a process that dies is restarted by Ray (its
    call retried)."""

    def __init__(self, handles: list[Any], name: str, call_timeout_s: float):
        self.handles, self.name, self.timeout_s = handles, name, call_timeout_s
        self.node_ids: list[str] = []

    def _gather(self, refs: list, what: str) -> list[Any]:
        out = []
        for k, ref in enumerate(refs):
            try:
                out.append(ray.get(ref, timeout=self.timeout_s))
            except GetTimeoutError as err:
                raise WorkerTimeoutError(f"{self.name} {k} did not finish {what} within "
                                         f"{self.timeout_s:.0f} s") from err
            except RayActorError as err:
                raise GorilaError(f"{self.name} {k} died and could not be restarted: {err}") from err
        return out

    def call(self, method: str, *args: Any) -> list[Any]:
        """Call ``method`` on every hosted object; the results in order."""
        return self._gather([h.call.remote(method, *args) for h in self.handles], method)

    def kill(self, index: int) -> None:
        """Kill process ``index``, as a crash would (Ray restarts it)."""
        ray.kill(self.handles[index].handle, no_restart=False)


class RayWorkers(_RayGroup):
    """A group of worker processes; a restarted worker's report has a new ``pid``."""

    def run_steps(self, steps: int) -> list[dict[str, Any]]:
        return self._gather([h.run_steps.remote(steps) for h in self.handles], f"{steps} steps")

    def start_steps(self, steps: int) -> list[RayPending]:
        return [RayPending(h.run_steps.remote(steps), f"{self.name} {k}") for k, h in enumerate(self.handles)]

    def reports(self) -> list[dict[str, Any]]:
        return self._gather([h.report.remote() for h in self.handles], "report")


class RayServices(_RayGroup):
    """A group of service processes (e.g. replay shards): called by others, never stepped."""

    def endpoints(self) -> list[RayService]:
        return [RayService(h, f"{self.name} {k}") for k, h in enumerate(self.handles)]


class RayRuntime:
    """Places shards and workers as Ray processes::

        runtime = RayRuntime()                       # embedded local Ray, loopback only
        runtime = RayRuntime(address="ray://...")    # or join a cluster (also via RAY_ADDRESS)

    Every process asks for ``cpus_per_process`` CPUs (a fraction on a small machine, so no
    worker waits forever for a CPU that does not exist); a worker that cannot be placed
    within ``schedule_timeout_s`` is a :class:`SchedulingError`. An address where nothing
    answers within ``connect_timeout_s`` is a :class:`ClusterUnreachableError` naming it (Ray
    itself would retry for minutes). Ray's own logs (start-up warnings, the workers' output)
    reach the console only when ``verbose``.
    """

    name = "ray"

    def __init__(self, address: str | None = None, num_cpus: int | None = None,
                 schedule_timeout_s: float = 60.0, call_timeout_s: float = 600.0,
                 max_restarts: int = 10, verbose: bool = False, connect_timeout_s: float = 10.0):
        self.schedule_timeout_s = schedule_timeout_s
        self.call_timeout_s = call_timeout_s
        self.max_restarts = max_restarts
        self._tag, self._serial = uuid.uuid4().hex[:8], itertools.count()
        self._owns = not ray.is_initialized()
        # Processes get one thread through a runtime_env, which makes Ray start fresh ones; an
        # embedded Ray started here inherits the variables instead and reuses the Python workers
        # it starts in advance (four workers importing torch came up in ~3 s instead of ~7 s).
        self._runtime_env: dict | None = {"env_vars": _ONE_THREAD}
        if self._owns:
            source = "--address" if address else "RAY_ADDRESS"
            address = address or os.environ.get("RAY_ADDRESS")
            logs = dict(logging_level=logging.INFO if verbose else logging.ERROR, log_to_driver=verbose)
            try:
                if address:
                    check_reachable(address, source, connect_timeout_s)
                    ray.init(address=address, **logs)
                else:
                    os.environ.update(_ONE_THREAD)
                    self._runtime_env = None
                    ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, **logs)
            except BaseException:
                ray.shutdown()  # a start cut short (Ctrl-C, an error) leaves no Ray process behind
                raise
        self.cpus_per_process = 1.0
        self._handles: list[Any] = []  # every process this runtime started, ended by shutdown()
        self._pending_start: list[tuple[Any, list, str]] = []
        # Closed before the processes are killed (fast paths, caches' shared memory).
        self._shard_groups: list[Any] = []

    @property
    def total_cpus(self) -> float:
        return float(ray.cluster_resources().get("CPU", 1.0))

    def plan(self, processes: int) -> None:
        """Share the cluster's CPUs among ``processes`` processes (at most one CPU each)."""
        self.cpus_per_process = max(0.01, min(1.0, int(100 * self.total_cpus / max(processes, 1)) / 100))

    def _worker_options(self) -> dict:
        return dict(num_cpus=self.cpus_per_process, max_restarts=self.max_restarts, max_task_retries=3,
                    **self._env())

    def _env(self) -> dict:
        return {} if self._runtime_env is None else {"runtime_env": self._runtime_env}

    def _names(self, kind: str, count: int) -> list[str]:
        """Cluster-unique actor names: a run shares a cluster with other runs."""
        return [f"gorila-{self._tag}-{kind}-{next(self._serial)}" for _ in range(count)]

    def _starting(self, group: Any, refs: list, what: str, wait: bool) -> None:
        """Note the replies that say ``group``'s processes are up; wait for them now, or with
        :meth:`wait_started` together with every other group started meanwhile."""
        self._pending_start.append((group, refs, what))
        if wait:
            self.wait_started()

    def wait_started(self) -> None:
        """Wait until every process started so far is up (their starts overlap meanwhile); a group
        that cannot be placed within ``schedule_timeout_s`` is a :class:`SchedulingError`."""
        pending, self._pending_start = self._pending_start, []
        deadline = time.monotonic() + self.schedule_timeout_s
        for group, refs, what in pending:
            try:
                group.node_ids = ray.get(refs, timeout=max(deadline - time.monotonic(), 0.0))
            except GetTimeoutError as err:
                raise SchedulingError(
                    f"{what} could not be placed within {self.schedule_timeout_s:.0f} s: each asks for "
                    f"{self.cpus_per_process} CPU and the cluster has {ray.available_resources().get('CPU', 0)} "
                    f"of {self.total_cpus} CPUs free. Use fewer workers or a bigger cluster.") from err

    def start_shards(self, spec: ServerSpec, params: np.ndarray, *, wait: bool = True) -> RayShards | SpreadShards:
        """Shard processes; or, with ``spec.placement == "workers"``, the server spread over the
        synchronous rule's workers in this node's shared memory (a one-node cluster only)."""
        if spec.placement == "workers":
            if len([node for node in ray.nodes() if node["Alive"]]) > 1:
                raise ConfigError("server", "workers shares memory between the workers of one node; this "
                                            "cluster has several: use --server process")
            group = SpreadShards(spec, params, spec.rule.aggregate, self.call_timeout_s)
            self._shard_groups.append(group)
            return group
        handles = [_NamedActor(_ShardProcess.options(num_cpus=self.cpus_per_process, scheduling_strategy="SPREAD",
                                                     max_concurrency=1000, name=name, **self._env()).remote(
                                                         self.call_timeout_s), name)
                   for name in self._names("shard", spec.num_shards)]
        self._handles += handles
        group = RayShards(handles, spec, params.size, self.call_timeout_s)
        self._shard_groups.append(group)
        loads = [h.load.remote(shard) for h, shard in zip(handles, spec.build(params))]
        self._starting(group, loads, f"{spec.num_shards} parameter shards", wait)
        return group

    def start_param_caches(self, server: ParameterServer, poll_s: float = 0.005) -> tuple[ParameterServer, Any]:
        """A parameter cache on every node (:mod:`gorila.runtime.ray_caches`); the server whose
        ``source()`` reads them, and the caches' group."""
        from gorila.runtime.ray_caches import start_param_caches  # built on this module's processes

        return start_param_caches(self, server, poll_s)

    def start_services(self, factory: ServiceFactory, count: int, *, name: str, wait: bool = True,
                       node_of: Callable[[int], int] | None = None) -> RayServices:
        nodes = alive_nodes() if node_of else []
        handles = [_NamedActor(_ServiceProcess.options(**self._worker_options(), name=actor,
                                                       **(pinned(nodes, node_of(k)) if node_of else {})).remote(factory, k),
                               actor)
                   for k, actor in enumerate(self._names(name, count))]
        self._handles += handles
        group = RayServices(handles, name, self.call_timeout_s)
        self._starting(group, [h.ready.remote() for h in handles], f"{count} {name}s", wait)
        return group

    def start_workers(self, factory: WorkerFactory, count: int, server: ParameterServer, *,
                      name: str, nice: int = 0, wait: bool = True,
                      node_of: Callable[[int], int] | None = None) -> RayWorkers:
        nodes = alive_nodes() if node_of else []
        handles = [_NamedActor(_WorkerProcess.options(**self._worker_options(), name=actor,
                                                      **(pinned(nodes, node_of(k)) if node_of else {})).remote(
                       factory, k, server, nice), actor)
                   for k, actor in enumerate(self._names(name, count))]
        self._handles += handles
        group = RayWorkers(handles, name, self.call_timeout_s)
        self._starting(group, [h.ready.remote() for h in handles], f"{count} {name}s", wait)
        return group

    def wait(self, pending: list[RayPending], timeout_s: float) -> list[int]:
        """Block in Ray until at least one reply is ready (or ``timeout_s`` passed)."""
        refs = [p.ref for p in pending]
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout_s)
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0) if ready else (ready, None)
        done = {r.hex() for r in ready}
        return [k for k, ref in enumerate(refs) if ref.hex() in done]

    def cpu_seconds(self) -> float:
        """This (driver) process's CPU time; groups report their own."""
        return process_cpu_seconds()

    def shutdown(self) -> None:
        """End this runtime's processes (and the embedded Ray, if this runtime started it)."""
        if not ray.is_initialized():
            return
        try:
            for group in self._shard_groups:
                group.close()
        finally:
            self._shard_groups.clear()
            for actor in self._handles:
                ray.kill(actor.handle, no_restart=True)
            self._handles.clear()
            if self._owns:
                ray.shutdown()
