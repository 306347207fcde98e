"""Everything in one process: the reference runtime, deterministic and easy to debug."""

from __future__ import annotations

import functools
import os
import random
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from gorila.core import ServiceFactory, ServiceGroup, Worker, WorkerFactory
from gorila.errors import CheckpointError, GorilaError
from gorila.metrics.cputime import process_cpu_seconds
from gorila.params import LocalEndpoint, ParameterServer, ServerSpec, ShardStats, shard_state, split_shard_state
from gorila.params.cache import CacheSpec, ParamCache, Upstream
from gorila.params.tiers import CacheTiers
from gorila.reply import Done, Pending, ServiceEndpoint
from gorila.runtime.local_steps import Stepper


class LocalShards:
    """Shards as plain objects in this process."""

    def __init__(self, spec: ServerSpec, params: np.ndarray, timeout_s: float):
        self.shards = spec.build(params)
        self.server = ParameterServer(tuple(LocalEndpoint(s) for s in self.shards), spec.layout(params.size),
                                      spec.rule, timeout_s)

    def pull(self) -> tuple[np.ndarray, list[int]]:
        parts = [s.pull() for s in self.shards]
        return np.concatenate([p for p, _ in parts]), [v for _, v in parts]

    def stats(self) -> list[ShardStats]:
        return [s.stats for s in self.shards]

    def state_dict(self) -> dict[str, np.ndarray]:
        return shard_state([s.state_dict() for s in self.shards])

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        for shard, part in zip(self.shards, split_shard_state(state, len(self.shards))):
            shard.load_state_dict(part)

    def cpu_seconds(self) -> float:
        return 0.0  # counted once, as the whole process's CPU time, by the runtime

    def restarts(self) -> list[str]:
        return []  # shards in this process die with it


class LocalWorkers:
    """Workers stepped in turn, one step each per round, so a synchronous round completes
    before anyone computes on the next version (the barrier of the Ray runtime, on one thread).
    A worker whose step says it is blocked sits out the rest of the chunk: what it waits for can
    only happen once the other groups have run. Parameter caches refresh before every round, on
    the stepping thread: the shards are plain objects, never read while a push changes them.

    ``start_steps`` hands the chunk to the runtime's :class:`~gorila.runtime.local_steps.Stepper`
    (its watchdog); ``rebuild(k)`` replaces worker ``k`` from ``factory`` (a stalled one), and its
    reports then say ``restarted`` with a ``pid`` of its own (``"<process>.<life>"``), as a
    restarted Ray worker's do, so that the driver counts it among ``worker_restarts``."""

    def __init__(self, workers: list[Worker], caches: list[ParamCache] | None = None, *, name: str = "worker",
                 factory: Callable[[int], Worker] | None = None, stepper: Stepper | None = None):
        self.workers, self.name, self.factory = workers, name, factory
        self.caches = caches if caches is not None else []
        self.stepper = stepper or Stepper()
        self.lives = [0] * len(workers)
        self._reasons: dict[int, str] = {}  # why a worker was rebuilt, told in its next report

    def run_steps(self, steps: int, seconds: float | None = None) -> list[dict[str, Any]]:
        reports = self.step_chunk(steps, seconds=seconds)
        assert reports is not None
        return reports

    def step_chunk(self, steps: int, before_step: Callable[[int], bool] | None = None,
                   seconds: float | None = None) -> list[dict[str, Any]] | None:
        """``steps`` rounds (fewer once every worker is blocked, or once ``seconds`` have passed);
        ``before_step(k)`` is asked before worker ``k`` steps, and False ends the chunk there (None
        returned: its thread was given up)."""
        ends = None if seconds is None else time.perf_counter() + seconds
        active = list(range(len(self.workers)))
        for taken in range(steps):
            if not active:  # every worker waits on another group: the rest of the chunk would be idle rounds
                break
            if ends is not None and taken and time.perf_counter() >= ends:
                return [{**report, "chunk_cut_after": taken} for report in self.reports()]
            for cache in self.caches:
                cache.refresh()
            still = []
            for k in active:
                if before_step is not None and not before_step(k):
                    return None
                if self.workers[k].step() is not False:
                    still.append(k)
            active = still
        return self.reports()

    def reports(self) -> list[dict[str, Any]]:
        return [self._report(k) for k in range(len(self.workers))]

    def _report(self, k: int) -> dict[str, Any]:
        report = self.workers[k].report()
        if self.lives[k]:
            report = {**report, "restarted": True, "pid": f"{os.getpid()}.{self.lives[k]}"}
            if k in self._reasons:
                report["restart_reason"] = self._reasons.pop(k)
        return report

    def start_steps(self, steps: int, seconds: float | None = None) -> list[Pending[dict[str, Any]]]:
        return self.stepper.submit(self, steps, seconds)

    def call(self, method: str, *args: Any) -> list[Any]:
        return [getattr(w, method)(*args) for w in self.workers]

    def rebuild(self, index: int, reason: str) -> None:
        """Replace worker ``index`` by a new one from the factory (the old one is left as it is:
        its step may still be stuck in an environment)."""
        if self.factory is None:
            raise GorilaError(f"{self.name} {index}: {reason}, and this group has no factory to rebuild it from")
        self.workers[index] = self.factory(index)
        self.lives[index] += 1
        self._reasons[index] = reason

    def kill(self, index: int) -> None:
        """A crash, as the Ray runtime's ``kill``: the worker is rebuilt (none may be stepping)."""
        self.rebuild(index, f"{self.name} {index} was killed")


class LocalService:
    """Calls a method of an object in this process; the reply is immediate."""

    def __init__(self, target: Any):
        self.target = target

    def call(self, method: str, *args: Any) -> Done[Any]:
        return Done(getattr(self.target, method)(*args))


class LocalServices:
    """Service objects in this process."""

    def __init__(self, services: list[Any]):
        self.services = services

    def endpoints(self) -> list[ServiceEndpoint]:
        return [LocalService(s) for s in self.services]

    def call(self, method: str, *args: Any) -> list[Any]:
        return [getattr(s, method)(*args) for s in self.services]

    def stats(self) -> list[Pending[dict[str, Any]]]:
        return [Done(s.stats()) for s in self.services]

    def save(self) -> None:
        for service in self.services:
            service.save()


class LocalRuntime:
    """One process; ``cpu_seconds`` is this process's CPU time. The workers' chunks are stepped
    on a thread the driver waits on with its timeouts, and a worker whose step has not returned
    after ``stall_s`` (``--actor-timeout-s``) is rebuilt (:mod:`gorila.runtime.local_steps`).
    PyTorch is held to one thread,
    as each Ray worker is: the local runtime is the one-core reference. ``shutdown`` closes the
    workers and services that have a ``close`` (a bundle's prefetch thread, an inference server's
    serving thread would otherwise keep them, and their envs, alive until the interpreter exits).
    ``snapshot()`` saves every worker and service placed, between chunks, and ``restore(data)``
    has the next start of each group use them (an exact resume, :mod:`gorila.driver.exact`)."""

    name = "local"

    def __init__(self, call_timeout_s: float = 600.0, stall_s: float | None = None):
        self.call_timeout_s = call_timeout_s
        self.stepper = Stepper(stall_s)  # every group's chunks, one after another, watched
        self._owned: list[Any] = []
        self._caches: list[ParamCache] = []
        self._shards: LocalShards | None = None
        self._groups: dict[str, LocalWorkers] = {}
        self._services: dict[str, LocalServices] = {}
        self._restored: Any = None  # a snapshot read back (an exact resume)
        self._processes: int | None = None  # as the plan counts them (plan())
        self._rngs: dict[str, Any] = {}

    def snapshot(self, extra: dict[str, Any]) -> bytes:
        """Every worker and service placed so far, with ``extra`` and this process's global RNGs
        (Python's, numpy's, torch's), as data (:mod:`gorila.runtime.snapshot`); taken between
        chunks, when no worker is stepping. The shards are referred to, not saved: a checkpoint
        holds them. Raises ``TypeError`` for what cannot be saved (a parameter cache in shared
        memory, an inference server's sockets and thread)."""
        if self._caches:
            raise TypeError("a parameter cache lives in shared memory and cannot be saved")
        parts: dict[str, Any] = {"rng": _global_rngs(), "extra": extra}
        parts.update((f"workers/{name}", group.workers) for name, group in self._groups.items())
        parts.update((f"services/{name}", group.services) for name, group in self._services.items())
        return _snapshot().dumps(parts, self._shared())

    def restore(self, data: bytes) -> dict[str, Any]:
        """Read a :meth:`snapshot` back once the shards are started (and restored): the global RNGs
        are set at once; the next ``start_workers`` / ``start_services`` of each saved group builds
        it as ever and loads the saved state into what it built (code always comes from this run,
        never from the snapshot). Returns the snapshot's ``extra``."""
        self._restored = _snapshot().loads(data, self._shared(), self._processes)
        self._rngs = self._restored.read("rng")
        _set_global_rngs(self._rngs)
        return self._restored.read("extra")

    def _built(self, kind: str, name: str, count: int, build: Callable[[int], Any]) -> list[Any]:
        """Group ``name`` built; with a restored snapshot that holds it, loaded with the saved state
        (refused unless it has ``count`` members). Building draws on the global RNGs (a network's
        initial weights) and pulls from the shards (which count what they send), so the saved RNGs
        and the shards' state are put back after it: the run goes on as if never stopped."""
        part = f"{kind}/{name}"
        if self._restored is None or part not in self._restored:
            return [build(k) for k in range(count)]
        assert self._shards is not None  # restore() needs them
        shards = self._shards.state_dict()
        fresh = [build(k) for k in range(count)]
        restored = self._restored.read(part, fresh=fresh)
        self._shards.load_state_dict(shards)
        _set_global_rngs(self._rngs)
        if len(restored) != count:
            raise CheckpointError(f"the checkpoint holds {len(restored)} in the {kind[:-1]} group {name!r}, "
                                  f"this run asks for {count}: resume with the settings it was saved with")
        return restored

    def _shared(self) -> dict[str, Any]:
        """What a snapshot refers to rather than saves: the server, its shards and their endpoints."""
        if self._shards is None:
            raise GorilaError("the shards are started before a snapshot is taken or read")
        return {"server": self._shards.server,
                **{f"shard{j}": s for j, s in enumerate(self._shards.shards)},
                **{f"endpoint{j}": e for j, e in enumerate(self._shards.server.endpoints)}}

    def plan(self, processes: int, caches: CacheTiers | None = None) -> None:
        """Nothing to share: everything runs in this process. How many processes the run would have
        elsewhere bounds the snapshot a :meth:`restore` reads."""
        self._processes = processes

    def start_shards(self, spec: ServerSpec, params: np.ndarray, *, wait: bool = True,
                     checkpoints: Path | None = None) -> LocalShards:
        self._shards = LocalShards(spec, params, self.call_timeout_s)
        return self._shards

    def start_param_caches(self, server: ParameterServer, tiers: CacheTiers = CacheTiers(),
                           wait_s: float = 0.25) -> tuple[ParameterServer, dict[str, ServiceGroup]]:
        """This machine's parameter cache (one node; with a rack tier, reading a rack cache here
        that reads the server), refreshed before every round of the workers, upstream first."""
        spec = CacheSpec(prefix=f"gorila-{uuid.uuid4().hex[:8]}-params", size=server.layout.size, wait_s=wait_s)
        groups: dict[str, ServiceGroup] = {}
        upstream: Upstream = server.upstream()
        if tiers.rack:
            rack = ParamCache(upstream, f"{spec.prefix}-rack-{spec.locate()[:24]}", spec.size, wait_s)
            self._caches.append(rack)
            groups["rack_cache"], upstream = LocalServices([rack]), rack
        self._caches.append(ParamCache(upstream, spec.shm_name(spec.locate()), spec.size, wait_s))
        groups["param_cache"] = LocalServices(self._caches[-1:])
        for cache in self._caches:
            cache.refresh()
        return replace(server, cache=spec), groups

    def start_services(self, factory: ServiceFactory, count: int, *, name: str, wait: bool = True,
                       node_of: Callable[[int], int] | None = None, gpus: float = 0.0) -> LocalServices:
        """Built at once, in this process (one node: ``node_of`` and ``gpus`` mean nothing here; a
        service on cuda uses this process's GPU); a restored snapshot's state loaded into them."""
        group = LocalServices(self._built("services", name, count, factory))
        self._services[name] = group
        self._owned += group.services  # closed at shutdown too (an inference server's thread)
        return group

    def start_workers(self, factory: WorkerFactory, count: int, server: ParameterServer, *,
                      name: str, nice: int = 0, wait: bool = True,
                      node_of: Callable[[int], int] | None = None, gpus: float = 0.0,
                      spread: bool = False) -> LocalWorkers:
        """Built at once, in this process (``nice``, ``wait``, ``node_of``, ``gpus`` and ``spread``
        mean nothing here); a restored snapshot's state loaded into them."""
        if "torch" in sys.modules:  # checked, not imported: lstsq workers never load torch
            sys.modules["torch"].set_num_threads(1)
        group = LocalWorkers(self._built("workers", name, count, lambda k: factory(k, server)),
                             self._caches, name=name, factory=functools.partial(_rebuilt, factory, server, self._owned),
                             stepper=self.stepper)
        self._groups[name] = group
        self._owned += group.workers
        return group

    def wait_started(self) -> None:
        """Everything was built when it was started."""

    def wait(self, pending: list[Any], timeout_s: float) -> list[int]:
        """Wait for every chunk under way (their thread is idle when this returns all of
        ``pending``: the driver never reads the shards while a worker changes them); the indices
        of the replies that are in."""
        self.stepper.wait(timeout_s)
        return [k for k, reply in enumerate(pending) if reply.ready()]

    def cpu_seconds(self) -> float:
        return process_cpu_seconds()

    def shutdown(self) -> None:
        self.stepper.close()
        for worker in self._owned:
            if hasattr(worker, "close"):
                worker.close()
        self._owned.clear()
        for cache in self._caches:
            cache.close()
        self._caches.clear()


def _rebuilt(factory: WorkerFactory, server: ParameterServer, owned: list[Any], index: int) -> Worker:
    """Worker ``index`` built again (closed at shutdown with the others)."""
    worker = factory(index, server)
    owned.append(worker)
    return worker


def _global_rngs() -> dict[str, Any]:
    torch = sys.modules.get("torch")  # checked, not imported: lstsq runs never load torch
    return {"python": random.getstate(), "numpy": np.random.get_state(),
            "torch": torch.get_rng_state() if torch is not None else None}


def _set_global_rngs(rngs: dict[str, Any]) -> None:
    random.setstate(rngs["python"])
    np.random.set_state(rngs["numpy"])
    if rngs["torch"] is not None:
        sys.modules["torch"].set_rng_state(rngs["torch"])


def _snapshot() -> Any:
    """:mod:`gorila.runtime.snapshot`, which imports torch: loaded by an exact resume's snapshot or
    restore only, since every Ray process imports this package (its shards and a numpy evaluator
    must stay without torch)."""
    from gorila.runtime import snapshot

    return snapshot
