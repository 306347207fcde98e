"""The Ray processes that host gorila's workers and services, and their groups as the driver
holds them. :class:`~gorila.runtime.ray_runtime.RayRuntime` starts them; the parameter caches
(:mod:`~gorila.runtime.ray_caches`) are service processes too::

    handles = [NamedActor(titled(WorkerProcess, f"actor-{k}").options(**options).remote(factory, k, server), name) ...]
    workers = RayWorkers(handles, "actor", call_timeout_s)
    reports = workers.run_steps(10)                   # every worker's report, in order
    replay = RayServices(handles, "replay", call_timeout_s)
    pending = replay.stats()                          # a reply per service, asked of all at once
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

from gorila.core import ServiceFactory, WorkerFactory
from gorila.errors import GorilaError, WorkerTimeoutError
from gorila.metrics.cputime import CpuClock
from gorila.params import ParameterServer
from gorila.reply import Pending, ServiceEndpoint
from gorila.runtime.ray_calls import NamedActor, RayPending, owned, ray
from gorila.runtime.service_socket import ServiceSocket, ServiceSocketServer, SocketLost, SocketReply

# isort: split
# Imports Ray: after gorila.runtime.ray_calls, which sets the environment Ray reads as it is imported.
from ray.exceptions import GetTimeoutError, RayActorError

# A blocked worker's backoff, doubling from the first to the last.
_BACKOFF_S = (0.001, 0.02)
# How long a client waits to connect to a service's socket before it keeps to Ray's calls.
_CONNECT_TIMEOUT_S = 10.0


class RayService:
    """Calls a method of the object hosted by a service process (picklable). A copy in a process on
    the service's node, once the service has said where its socket is, calls over that socket
    (:mod:`gorila.runtime.service_socket`: no Ray call on either side); elsewhere, until then, and
    after its socket fails, as a Ray call. A call the socket lost is made again as a Ray call, which
    Ray delivers to the restarted process (calls that must not be applied twice carry their own
    numbers: a trajectory queue's or a replay shard's adds). Any number of a process's threads may
    call it (a node's actors adding to one replay shard): they share the one socket."""

    def __init__(self, handle: Any, what: str):
        self.handle, self.what = handle, what
        self._where: RayPending | None = None  # the service's node and socket, once asked
        self._socket: ServiceSocket | None = None
        self._ray_only = False  # the service is on another node, or has no socket
        self._finding = threading.Lock()  # one thread at a time asks where the socket is, and connects

    def __getstate__(self) -> dict[str, Any]:
        return {"handle": self.handle, "what": self.what}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["handle"], state["what"])  # type: ignore[misc]

    def call(self, method: str, *args: Any) -> Pending[Any]:
        channel = self._channel()
        if channel is not None:
            try:
                return _SocketOrRay(channel.call(method, args), functools.partial(self._ray_call, method, args))
            except SocketLost:
                pass  # the next call asks the service where its socket is now
        return self._ray_call(method, args)

    def _ray_call(self, method: str, args: tuple[Any, ...]) -> RayPending:
        return RayPending(self.handle.call.remote(method, *args), f"{self.what}.{method}")

    def _channel(self) -> ServiceSocket | None:
        channel = self._socket
        if channel is not None and not channel.closed:
            return channel
        # Another thread finding it meanwhile (at most one connect's timeout): this call goes by Ray.
        if not self._finding.acquire(timeout=_CONNECT_TIMEOUT_S):
            return None
        try:
            return self._find_channel()
        finally:
            self._finding.release()

    def _find_channel(self) -> ServiceSocket | None:
        if self._socket is not None and not self._socket.closed:
            return self._socket
        if self._socket is not None:  # lost: a restarted service listens on a new socket
            self._socket, self._where = None, None
        if self._ray_only:
            return None
        if self._where is None:
            self._where = RayPending(self.handle.socket_at.remote(), f"{self.what}.socket_at")
            return None
        if not self._where.ready():
            return None
        try:
            node, path = self._where.result(timeout_s=0.0)
        except Exception:  # the service died meanwhile: ask its next process
            self._where = None
            return None
        if path is None or node != ray.get_runtime_context().get_node_id():
            self._ray_only = True
            return None
        try:
            self._socket = ServiceSocket(path, timeout_s=_CONNECT_TIMEOUT_S)
        except OSError:
            self._where = None
        return self._socket


class _SocketOrRay:
    """A reply on its way over a service's socket that, should the socket fail first, is asked for
    again as a Ray call (``again``)."""

    def __init__(self, reply: SocketReply, again: Callable[[], RayPending]):
        self.reply: SocketReply | RayPending = reply
        self.again = again

    def result(self, timeout_s: float) -> Any:
        try:
            return self.reply.result(timeout_s)
        except SocketLost:  # only a socket's reply raises it
            self.reply = self.again()
            return self.reply.result(timeout_s)

    def ready(self) -> bool:
        try:
            return self.reply.ready()
        except SocketLost:
            self.reply = self.again()
            return self.reply.ready()


def settled() -> None:
    """The process built: what it holds now (modules, PyTorch, the object it hosts) lives as long as
    it does, and is left out of the garbage collector's full passes (``gc.freeze``). A full pass over
    the ~200,000 objects of such a process took 96 ms, every thread of it stopped meanwhile: likely
    the longest replay writes of ``gorila bench menger`` (126 ms where the 99th percentile was 7 ms;
    19 ms over 10 ms, the same cell, with the objects frozen).
    No collection first: a start-up's few cycles left are not worth its time (about as long again)."""
    gc.freeze()


@functools.cache
def titled(host: type, title: str) -> Any:
    """``host`` (a class that hosts gorila objects) as a Ray actor class named ``title``, the role
    and index of its process (``actor-3``, ``learner-0``, ``replay-1``, ``shard-0``, ``evaluator-0``)::

        titled(WorkerProcess, "actor-3").options(**options).remote(factory, 3, server)

    Ray titles an actor's process after its class (``ray::actor-3`` in ``ps`` and ``top``;
    ``ray::actor-3.run_steps`` during a call), and a restarted process is titled the same, so a
    class per process tells them apart, where one class would title them all alike."""
    return ray.remote(type(title, (host,), {"__doc__": host.__doc__}))


def this_service(what: str) -> ServiceEndpoint:
    """How another process reaches the service process this runs in (its factory, building the
    service in it): a parameter cache hands it to the upstream it subscribes to. By name, so a
    copy held elsewhere reaches the process Ray restarts under that name."""
    name = ray.get_runtime_context().get_actor_name()
    if name is None:
        raise RuntimeError(f"{what}: this_service() is called in a named service process only")  # the runtime's are
    return RayService(NamedActor(None, name), what)


class ServiceProcess:
    """Hosts one service object (a replay shard), built here from its factory; others call it.

    A ``serial`` service (Ray runs its calls one at a time) is served on its node over a socket too
    (:class:`~gorila.runtime.service_socket.ServiceSocketServer`), its calls then serialised by a
    lock; a service that Ray runs on threads (a parameter cache answering long polls) answers Ray's
    calls only, since a socket's calls are answered in order."""

    def __init__(self, factory: ServiceFactory, service_id: int, serial: bool = True):
        self.cpu = CpuClock()
        self.service = factory(service_id)
        self.lock = threading.Lock() if serial else contextlib.nullcontext()
        self.server = ServiceSocketServer(self.call) if serial else None
        self.socket_path = self.server.start() if self.server is not None else None
        settled()

    def ready(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def socket_at(self) -> tuple[str, str | None]:
        """This process's node and the path of its socket (None: Ray's calls only)."""
        return ray.get_runtime_context().get_node_id(), self.socket_path

    def call(self, method: str, *args: Any) -> Any:
        with self.lock:
            return getattr(self.service, method)(*args)

    def stats(self) -> dict[str, Any]:
        """The service's stats, with its process's CPU seconds (``cpu_s``: a run's summary counts them
        by service group, beside the workers' own)."""
        with self.lock:
            return {**self.service.stats(), "cpu_s": self.cpu.seconds()}

    def save(self) -> None:
        with self.lock:
            self.service.save()


class WorkerProcess:
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
        settled()

    def ready(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def run_steps(self, steps: int, seconds: float | None = None) -> dict[str, Any]:
        self.first_step_at = self.first_step_at or time.time()
        ends = None if seconds is None else time.perf_counter() + seconds
        blocked = 0
        for taken in range(1, steps + 1):
            if self.worker.step() is False:
                # Waiting on another process (a rate limiter): leave it the CPU, a little longer each time.
                time.sleep(min(_BACKOFF_S[0] * 2 ** blocked, _BACKOFF_S[1]))
                blocked += 1
            else:
                blocked = 0
            if ends is not None and taken < steps and time.perf_counter() >= ends:
                return {**self.report(), "chunk_cut_after": taken}
        return self.report()

    def report(self) -> dict[str, Any]:
        return {**self.worker.report(), "cpu_s": self.cpu.seconds(), "restarted": self.restarted,
                "pid": os.getpid(), "first_step_at": self.first_step_at}

    def call(self, method: str, *args: Any) -> Any:
        return getattr(self.worker, method)(*args)


class RayGroup:
    """Processes of one kind started together; a process that dies is restarted by Ray (its
    call retried). ``node_ids`` are filled in once the runtime has seen them start."""

    def __init__(self, handles: list[Any], name: str, call_timeout_s: float):
        self.handles, self.name, self.timeout_s = handles, name, call_timeout_s
        self.node_ids: list[str] = []

    def _gather(self, refs: list, what: str) -> list[Any]:
        out = []
        for k, ref in enumerate(refs):
            try:
                out.append(owned(ray.get(ref, timeout=self.timeout_s)))
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


class RayWorkers(RayGroup):
    """A group of worker processes; a restarted worker's report has a new ``pid``."""

    def run_steps(self, steps: int, seconds: float | None = None) -> list[dict[str, Any]]:
        return self._gather([h.run_steps.remote(steps, seconds) for h in self.handles], f"{steps} steps")

    def start_steps(self, steps: int, seconds: float | None = None) -> list[Pending[dict[str, Any]]]:
        return [RayPending(h.run_steps.remote(steps, seconds), f"{self.name} {k}")
                for k, h in enumerate(self.handles)]

    def reports(self) -> list[dict[str, Any]]:
        return self._gather([h.report.remote() for h in self.handles], "report")


class RayServices(RayGroup):
    """A group of service processes (e.g. replay shards): called by others, never stepped."""

    def endpoints(self) -> list[ServiceEndpoint]:
        return [RayService(h, f"{self.name} {k}") for k, h in enumerate(self.handles)]

    def stats(self) -> list[Pending[dict[str, Any]]]:
        return [RayPending(h.stats.remote(), f"{self.name} {k}.stats") for k, h in enumerate(self.handles)]

    def save(self) -> None:
        self._gather([h.save.remote() for h in self.handles], "save")
