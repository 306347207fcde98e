"""Parameter shards as Ray processes: the process that hosts one, and the group (how a client
reaches one is :mod:`gorila.runtime.ray_shard_endpoint`).

A shard process started with a :class:`~gorila.runtime.shard_recovery.ShardRecovery` is
restartable: Ray starts it again after a crash and it restores itself from the run's last
checkpoint in a new epoch (calls in flight are retried on it by Ray; a fast-path call whose
connection broke is answered with the restored parameters, fetched through Ray). Clients then
see the shard's version go back and compute on the restored parameters.
"""

from __future__ import annotations

import asyncio
import copy
import os
import warnings
from typing import Any

import numpy as np

from gorila.errors import CheckpointError, WorkerTimeoutError
from gorila.metrics.cputime import CpuClock
from gorila.params import (
    ParameterServer,
    ParameterShard,
    PushResult,
    PushTag,
    ServerSpec,
    ShardStats,
    shard_state,
    split_shard_state,
)
from gorila.params.broadcast import Broadcast
from gorila.runtime.ray_calls import owned, ray
from gorila.runtime.ray_shard_endpoint import FastPathAddress, RayShardEndpoint
from gorila.runtime.shard_host import ShardHost
from gorila.runtime.shard_recovery import ShardRecovery
from gorila.runtime.shm import FastPathServer

# isort: split
# Imports Ray: after gorila.runtime.ray_calls, which sets the environment Ray reads as it is imported.
from ray.exceptions import GetTimeoutError


class ShardProcess:
    """Hosts one :class:`ParameterShard` behind a :class:`ShardHost`. Ray methods run on the
    actor's asyncio loop, so a barrier push awaits the version that completes it while the other
    workers' pushes keep arriving; same-node clients are served on threads of the fast path
    (:mod:`gorila.runtime.shm`). Every update, from either side, wakes the loop's waiters.
    With a ``recovery``, a process Ray restarted restores the shard itself on its first call."""

    def __init__(self, barrier_timeout_s: float, recovery: ShardRecovery | None = None):
        self.cpu = CpuClock()
        self.barrier_timeout_s = barrier_timeout_s
        self.recovery = recovery
        self.host: ShardHost | None = None
        self.fast_path: FastPathServer | None = None
        self.fast_path_path: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loaded = asyncio.Event()  # calls that need the shard wait for it: they may come first
        self._next_version = asyncio.Event()  # set (and replaced) whenever the version moves on
        self._waiting = 0  # Ray pushes waiting at the barrier (changed on the loop only)
        self.broadcast: Broadcast | None = None  # the caches subscribed to the shard, once one is
        with warnings.catch_warnings():  # Ray deprecates an internal it calls here; the API stays
            warnings.simplefilter("ignore", DeprecationWarning)
            restarted = ray.get_runtime_context().was_current_actor_reconstructed
        self._must_restore = restarted and recovery is not None
        self.restored_from: str | None = None

    def _host(self, shard: ParameterShard) -> None:
        self._loop = asyncio.get_running_loop()
        self.host = ShardHost(shard, self.barrier_timeout_s, on_advance=self._advanced)
        self.fast_path = FastPathServer(self.host.push, self.host.pull, self.host.size, publish=self.host.publish)
        self.fast_path_path = self.fast_path.start()
        self._loaded.set()

    async def _ready(self) -> ShardHost:
        """The shard's host, once there is one (a restarted process restores its shard first)."""
        if self._must_restore and self.recovery is not None:
            self._must_restore = False
            try:
                shard, self.restored_from = self.recovery.restore()
            except CheckpointError:  # died before it saved its start: the driver's load() is retried
                pass
            else:
                self._host(shard)
        await self._loaded.wait()
        if self.host is None:
            raise RuntimeError("the shard process was loaded without a host")  # _host sets both
        return self.host

    async def load(self, shard: ParameterShard) -> str:
        """Take the shard and start serving same-node clients; returns this node's id."""
        self._must_restore = False
        # Arrays that arrive through Ray's object store are read-only views: own a copy.
        shard = copy.deepcopy(shard)
        if self.recovery is not None:
            self.recovery.save_start(shard)
        self._host(shard)
        return ray.get_runtime_context().get_node_id()

    async def fast_path_address(self) -> FastPathAddress | None:
        """Where same-node clients reach this shard without Ray calls (None where unsupported)."""
        host = await self._ready()
        if self.fast_path_path is None:
            return None
        return FastPathAddress(ray.get_runtime_context().get_node_id(), self.fast_path_path, host.size)

    async def life(self) -> tuple[int, str | None]:
        """This process's id and, after a restart, the checkpoint it came back from."""
        await self._ready()
        return os.getpid(), self.restored_from

    def _advanced(self) -> None:
        if self.broadcast is not None and self.host is not None:  # the host calls this with its lock held
            self.broadcast.advanced(self.host.shard.version)
        # Only when a Ray push waits: waking the loop for nothing would take the GIL from the
        # fast path's threads on every update.
        if self._waiting and self._loop is not None:  # a waiter runs on the loop, which _host set
            self._loop.call_soon_threadsafe(self._wake_waiters)

    def _wake_waiters(self) -> None:
        event, self._next_version = self._next_version, asyncio.Event()
        event.set()

    async def push(self, grad: np.ndarray, version: int, worker_id: int, tag: PushTag | None = None) -> PushResult:
        host = await self._ready()
        result = host.push(grad, version, worker_id, wait=False, tag=tag)
        if not host.must_wait(result, version):
            return result
        if not await self._reached(host, version + 1, self.barrier_timeout_s):
            raise host.barrier_timeout(version, worker_id)
        return host.refreshed(result, tag=tag)

    async def wait_version(self, at_least: int, wait_s: float) -> int:
        """The version once it is ``at_least``, or after ``wait_s`` (at most the barrier's
        timeout) if it is not by then: a worker waits here for an update without polling."""
        host = await self._ready()
        await self._reached(host, at_least, min(wait_s, self.barrier_timeout_s))
        return host.version

    async def _reached(self, host: ShardHost, at_least: int, wait_s: float) -> bool:
        """Whether ``host``'s version reached ``at_least`` within ``wait_s``; other calls run meanwhile."""
        loop = asyncio.get_running_loop()  # the actor's one loop, the one _host keeps
        deadline = loop.time() + wait_s
        self._waiting += 1  # before the version check: an update after it then wakes this loop
        try:
            while host.version < at_least:
                # Nothing runs on this loop between the check and the wait: the event taken
                # here is set by the next version, whichever thread makes it.
                await asyncio.wait_for(self._next_version.wait(), deadline - loop.time())
        except asyncio.TimeoutError:
            return False
        finally:
            self._waiting -= 1
        return True

    async def pull(self) -> tuple[np.ndarray, int]:
        return (await self._ready()).pull()

    async def subscribe(self, name: str, endpoint: Any, held: int) -> int:
        """Send each new version after ``held`` to the cache at ``endpoint`` (a restarted process
        has no subscribers until each cache's next probe subscribes it again); the version now."""
        host = await self._ready()
        if self.broadcast is None:
            self.broadcast = Broadcast(host.current, host.shard.shard_id, host.version, self.barrier_timeout_s)
        return self.broadcast.subscribe(name, endpoint, held)

    async def version(self) -> int:
        return (await self._ready()).version

    async def stats(self) -> ShardStats:
        with (await self._ready()).locked() as shard:
            return copy.deepcopy(shard.stats)  # Ray pickles it after the lock is released

    async def state_dict(self) -> dict[str, np.ndarray]:
        with (await self._ready()).locked() as shard:
            return shard.state_dict()

    async def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        with (await self._ready()).locked() as shard:
            shard.load_state_dict(state)

    async def publish(self, state: dict[str, np.ndarray]) -> None:
        """Take the owning learner's publication (``--server learner``); its version wakes the
        calls waiting for one (a cache's long-poll)."""
        (await self._ready()).publish(state)

    def cpu_seconds(self) -> float:
        return self.cpu.seconds()

    def close_fast_path(self) -> None:
        if self.fast_path is not None:
            self.fast_path.close()
        if self.broadcast is not None:
            self.broadcast.close()


class RayShards:
    """The shard processes of one parameter server; ``server`` is how workers reach them."""

    def __init__(self, handles: list[Any], spec: ServerSpec, size: int, call_timeout_s: float):
        self.handles = handles
        self.layout = spec.layout(size)
        self.rule = spec.rule
        self.timeout_s = call_timeout_s
        self.endpoints = self._endpoints(fast=True)  # this process's: their fast paths close with the shards
        self.server = ParameterServer(self.endpoints, self.layout, self.rule, self.timeout_s)
        self.node_ids: list[str] = []
        self._pids: dict[int, int] = {}

    def ray_call_server(self) -> ParameterServer:
        """The server reached through Ray calls only, even on the shards' node (for comparisons)."""
        return ParameterServer(self._endpoints(fast=False), self.layout, self.rule, self.timeout_s)

    def _endpoints(self, fast: bool) -> tuple[RayShardEndpoint, ...]:
        return tuple(RayShardEndpoint(h, i, fast, self.timeout_s) for i, h in enumerate(self.handles))

    def close(self) -> None:
        """Close the fast paths: this process's channels, then the shards' sockets and dirs.
        A shard that already died has nothing left to close and is skipped."""
        for endpoint in self.endpoints:
            endpoint.close()
        refs = [h.close_fast_path.remote() for h in self.handles]
        _, unfinished = ray.wait(refs, num_returns=len(refs), timeout=self.timeout_s)
        if unfinished:
            raise WorkerTimeoutError(f"{len(unfinished)} shards did not close their fast path within "
                                     f"{self.timeout_s:.0f} s")

    def _get(self, refs: list, what: str) -> list:
        try:
            return owned(ray.get(refs, timeout=self.timeout_s))
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

    def restarts(self) -> list[str]:
        """A sentence for each shard restarted since the last call, saying where it came back from
        (a process restarted twice between calls counts once)."""
        out = []
        for k, (pid, source) in enumerate(self._get([h.life.remote() for h in self.handles], "life")):
            if source is not None and self._pids.get(k) != pid:
                out.append(f"parameter shard {k} was restarted and came back from {source}")
            self._pids[k] = pid
        return out

    def kill(self, index: int) -> None:
        """Kill shard process ``index``, as a crash would (Ray restarts a restartable one)."""
        ray.kill(self.handles[index].handle, no_restart=False)
