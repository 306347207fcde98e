"""A synchronous parameter server spread over its workers: no process of its own.

Under the synchronous rule every round is the same: all ``m`` workers push, the mean is applied,
all go on with the new version. On one node that needs no server process at all. Shard ``j`` of
the flat vector is *owned* by worker ``j mod m``; the parameters, each worker's gradient, the
owners' optimizer state and a few counters live in one shared-memory segment. A round is a
reduce-scatter plus an all-gather in place::

    worker i: write its gradient, mark "round v+1 arrived" for every shard
    owner of j: wait until all m arrived, average, optimizer step on shard j, version_j = v + 1
    worker i: wait until every version is v + 1; the new parameters are already in shared memory

Waits spin briefly and then yield the core (a round is short; a process switch per round is what
this placement saves), and end in a :class:`WorkerTimeoutError` after ``timeout_s``. Stores become
visible in program order only on CPUs with total store order (x86-64): elsewhere this placement
is refused. The driver owns the segment (:class:`SpreadShards`, a ``ShardGroup``); workers reach
it through :class:`SpreadEndpoint` (picklable: it carries the segment's name)::

    shards = SpreadShards(spec, initial_params, num_workers=2, timeout_s=600)
    client = shards.server.client(worker_id=1)     # in a worker process on this node
    client.params(); client.push(grad)             # one synchronous round
"""

from __future__ import annotations

import os
import platform
import time
from collections import Counter
from dataclasses import dataclass
from multiprocessing import resource_tracker, shared_memory

import numpy as np

from gorila.reply import Done
from gorila.errors import ConfigError, VersionError, WorkerTimeoutError
from gorila.params import ParameterServer, PushResult, PushTag, ServerSpec, ShardStats, shard_state, split_shard_state
from gorila.params.optim import make_optimizer, optimizer_slots
from gorila.params.shard import all_finite

# Spins before a wait starts yielding its core to other processes.
_SPINS = 200


def supported() -> bool:
    """Whether this CPU keeps stores in program order, as the rounds' flags rely on."""
    return platform.machine().lower() in ("x86_64", "amd64")


@dataclass(frozen=True)
class _Layout:
    """Where everything sits in the segment (offsets in bytes)."""

    size: int
    num_shards: int
    num_workers: int
    slots: tuple[str, ...]

    @property
    def counters(self) -> int:  # int64: versions, steps, arrived[m, S], pushes[m, S], rejected[m, S]
        return 2 * self.num_shards + 3 * self.num_workers * self.num_shards

    @property
    def nbytes(self) -> int:
        return 8 * self.counters + 4 * self.size * (1 + self.num_workers + len(self.slots))

    def views(self, buffer) -> dict[str, np.ndarray]:
        S, m = self.num_shards, self.num_workers
        ints = np.ndarray((self.counters,), np.int64, buffer)
        floats = np.ndarray((self.size * (1 + m + len(self.slots)),), np.float32, buffer, 8 * self.counters)
        out = {"versions": ints[:S], "steps": ints[S:2 * S],
               "arrived": ints[2 * S:2 * S + m * S].reshape(m, S),
               "pushes": ints[2 * S + m * S:2 * S + 2 * m * S].reshape(m, S),
               "rejected": ints[2 * S + 2 * m * S:].reshape(m, S),
               "params": floats[:self.size], "grads": floats[self.size:self.size * (1 + m)].reshape(m, self.size)}
        for k, slot in enumerate(self.slots):
            out[slot] = floats[self.size * (1 + m + k):self.size * (2 + m + k)]
        return out


class SpreadShards:
    """The driver's side: creates and owns the segment; a ``ShardGroup`` the driver reads and
    checkpoints like any other. Refused unless the rule is synchronous and the CPU keeps stores
    in order."""

    def __init__(self, spec: ServerSpec, params: np.ndarray, num_workers: int, timeout_s: float):
        if not spec.rule.barrier:
            raise ConfigError("server", "workers: spreading the server over its workers needs --mode sync")
        if not supported():
            raise ConfigError("server", f"workers: needs an x86-64 CPU (total store order), not {platform.machine()}")
        self.spec, self.slices = spec, spec.layout(params.size).slices
        self.layout = _Layout(params.size, spec.num_shards, num_workers, optimizer_slots(spec.optimizer))
        self.memory = shared_memory.SharedMemory(create=True, size=self.layout.nbytes)
        self.views = self.layout.views(self.memory.buf)
        self.views["params"][:] = params
        endpoints = tuple(SpreadEndpoint(self.memory.name, self.layout, spec, j, timeout_s)
                          for j in range(spec.num_shards))
        self.server = ParameterServer(endpoints, spec.layout(params.size), spec.rule, timeout_s)

    def pull(self) -> tuple[np.ndarray, list[int]]:
        return self.views["params"].copy(), self.views["versions"].tolist()

    def stats(self) -> list[ShardStats]:
        out = []
        for j, part in enumerate(self.slices):
            pushes = int(self.views["pushes"][:, j].sum())
            rejected = int(self.views["rejected"][:, j].sum())
            nbytes = 4 * (part.stop - part.start)
            out.append(ShardStats(pushes_counted=pushes, pushes_rejected_nonfinite=rejected,
                                  updates=int(self.views["versions"][j]), bytes_in=(pushes + rejected) * nbytes,
                                  bytes_out=pushes * nbytes, staleness=Counter({0: pushes + rejected})))
        return out

    def state_dict(self) -> dict[str, np.ndarray]:
        states = []
        for j, part in enumerate(self.slices):
            state = {"params": self.views["params"][part].copy(),
                     "counters": np.array([self.views["versions"][j], 0, 0], np.int64)}
            state.update({f"optim.{slot}": self.views[slot][part].copy() for slot in self.layout.slots})
            state["optim.steps"] = np.array([self.views["steps"][j]], np.int64)
            states.append(state)
        return shard_state(states)

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        for j, (part, shard) in enumerate(zip(self.slices, split_shard_state(state, self.spec.num_shards))):
            self.views["params"][part] = shard["params"]
            self.views["versions"][j] = int(shard["counters"][0])
            self.views["arrived"][:, j] = int(shard["counters"][0])
            for slot in self.layout.slots:
                self.views[slot][part] = shard[f"optim.{slot}"]
            self.views["steps"][j] = int(shard["optim.steps"][0])

    def cpu_seconds(self) -> float:
        return 0.0  # the owners' work is counted in the workers' processes

    def restarts(self) -> list[str]:
        return []  # the shards live in the workers' shared memory: a restarted worker finds them there

    def close(self) -> None:
        self.views = {}
        self.memory.close()
        self.memory.unlink()


class SpreadEndpoint:
    """Shard ``j`` as its clients reach it (see the module doc). Picklable: each process attaches
    to the segment on first use; the owner builds the shard's optimizer over the shared state."""

    def __init__(self, name: str, layout: _Layout, spec: ServerSpec, shard_id: int, timeout_s: float):
        self.name, self.layout, self.spec, self.shard_id, self.timeout_s = name, layout, spec, shard_id, timeout_s
        self._views: dict[str, np.ndarray] | None = None
        self._optimizer = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_views": None, "_optimizer": None, "_memory": None}

    @property
    def views(self) -> dict[str, np.ndarray]:
        if self._views is None:
            self._memory = shared_memory.SharedMemory(name=self.name)
            # The driver owns the segment: this process must not unlink it when it exits.
            resource_tracker.unregister(self._memory._name, "shared_memory")
            self._views = self.layout.views(self._memory.buf)
            # Built at attach, not in a round: building one may import torch (a second or so).
            part, views = self.part, self._views
            lr = self.spec.lr[part] if isinstance(self.spec.lr, np.ndarray) else self.spec.lr
            self._optimizer = make_optimizer(self.spec.optimizer, part.stop - part.start, lr,
                                             state={slot: views[slot][part] for slot in self.layout.slots})
        return self._views

    @property
    def part(self) -> slice:
        return self.spec.layout(self.layout.size).slices[self.shard_id]

    def push(self, grad: np.ndarray, version: int, worker_id: int,
             tag: PushTag | None = None) -> Done[PushResult] | _Round:
        """One worker's gradient for this round. ``tag`` is not needed: each worker writes its
        own row of the round, so a repeat overwrites itself, and a spread server is never restarted."""
        views, j = self.views, self.shard_id
        current = int(views["versions"][j])
        if version > current:
            raise VersionError(f"shard {j}: version {version} from worker {worker_id} is from the future "
                               f"(shard is at version {current})")
        if version < current or not all_finite(grad):  # rejected: nothing joins, fresh parameters back
            views["rejected"][worker_id, j] += 1
            reason = "stale" if version < current else "nonfinite"
            return Done(PushResult("rejected", False, current, current - version, reason,
                                   views["params"][self.part].copy()))
        views["grads"][worker_id, self.part] = grad
        views["pushes"][worker_id, j] += 1
        views["arrived"][worker_id, j] = version + 1  # after the gradient: the owner reads it next
        return _Round(self, version, worker_id)

    def pull(self) -> Done[tuple[np.ndarray, int]]:
        return Done((self.views["params"][self.part].copy(), int(self.views["versions"][self.shard_id])))

    def version(self) -> Done[int]:
        return Done(int(self.views["versions"][self.shard_id]))

    def connect(self) -> None:
        """Attach to the segment and build the shard's optimizer."""
        self.views

    def apply(self, version: int) -> None:
        """The owner's part of a round: wait for every worker's gradient, step, publish ``version + 1``."""
        views, j, part = self.views, self.shard_id, self.part
        wait_until(lambda: (views["arrived"][:, j] == version + 1).all(), self.timeout_s,
                   f"shard {j} waited for every worker's gradient of version {version}")
        self._optimizer.steps = int(views["steps"][j])
        mean = views["grads"][:, part].mean(axis=0, dtype=np.float32)
        self._optimizer.step(views["params"][part], mean)
        views["steps"][j] = self._optimizer.steps
        views["versions"][j] = version + 1  # after the parameters: the others read them next


class _Round:
    """A push's reply: ready once the shard's owner has published the next version."""

    def __init__(self, endpoint: SpreadEndpoint, version: int, worker_id: int):
        self.endpoint, self.version, self.worker_id = endpoint, version, worker_id

    def ready(self) -> bool:
        return int(self.endpoint.views["versions"][self.endpoint.shard_id]) > self.version

    def result(self, timeout_s: float) -> PushResult:
        endpoint, j = self.endpoint, self.endpoint.shard_id
        owner = j % endpoint.layout.num_workers == self.worker_id
        if owner:
            endpoint.apply(self.version)
        else:
            wait_until(self.ready, timeout_s, f"worker {self.worker_id} waited at the barrier of version "
                                              f"{self.version + 1} of shard {j}")
        return PushResult("counted", owner, self.version + 1, 0, None, endpoint.views["params"][endpoint.part])


def wait_until(condition, timeout_s: float, what: str) -> None:
    """Spin on ``condition``, then yield the core between checks; a :class:`WorkerTimeoutError`
    once ``timeout_s`` has passed (``what`` says who waited for what)."""
    spins = 0
    deadline = None
    while not condition():
        spins += 1
        if spins < _SPINS:
            continue
        os.sched_yield()
        if spins % 1024 == 0:
            now = time.monotonic()
            deadline = deadline or now + timeout_s
            if now > deadline:
                raise WorkerTimeoutError(f"{what} for {timeout_s:.0f} s; a worker stopped pushing")
