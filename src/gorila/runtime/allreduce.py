"""A synchronous parameter server spread over its workers: no process of its own.

Under the synchronous rule every round is the same: all ``m`` workers push, the mean is applied,
all go on with the new version. On one node that needs no server process at all. Shard ``j`` of
the flat vector is *owned* by worker ``j mod m``; the parameters, each worker's gradient, the
owners' optimizer state and a few counters live in one shared-memory segment. A round is a
reduce-scatter plus an all-gather in place::

    worker i: judge its push as a shard does; write its gradient, mark "round v+1 arrived" for every shard
    owner of j: wait until all m arrived, the shard's round (mean, optimizer step), version_j = v + 1
    worker i: wait until every version is v + 1; the new parameters are already in shared memory

A push is judged by :func:`~gorila.params.shard.judge_push` and a round applied by
:func:`~gorila.params.shard.apply_round`, the functions a :class:`~gorila.params.ParameterShard`
uses: a stale or non-finite gradient is rejected with nothing changed, the ``nonfinite_limit``-th
in a row from one worker stops it, and the rejected worker's next push completes the round; a
round whose step leaves parameters or optimizer state non-finite is rolled back and counted
(``updates_rolled_back``), its version published all the same.

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
from gorila.errors import ConfigError, WorkerTimeoutError
from gorila.params import (ParameterServer, PushResult, PushTag, ServerSpec, ShardStats, UpdateRule, shard_state,
                           split_shard_state)
from gorila.params.optim import make_optimizer, optimizer_slots
from gorila.params.shard import Verdict, apply_round, check_push, check_state, judge_push

# Spins before a wait starts yielding its core to other processes.
_SPINS = 200
# A worker's counters of one shard (it alone writes them): ShardStats fields, its non-finite streak,
# then the staleness histogram. Under the synchronous rule a push is at most one version behind
# unless its worker kept parameters across a resume; staleness beyond the last bin is counted there.
_TALLY = ("pushes_counted", "pushes_rejected_stale", "pushes_rejected_nonfinite", "bytes_in", "bytes_out", "streak",
          "updates_rolled_back")
_STALENESS_BINS = 16
_COUNTED, _STALE, _NONFINITE, _BYTES_IN, _BYTES_OUT, _STREAK, _ROLLED_BACK = range(len(_TALLY))


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
    def counters(self) -> int:  # int64: versions, steps, arrived[m, S], tally[m, S, fields + bins]
        return 2 * self.num_shards + self.num_workers * self.num_shards * (1 + len(_TALLY) + _STALENESS_BINS)

    @property
    def nbytes(self) -> int:
        return 8 * self.counters + 4 * self.size * (1 + self.num_workers + len(self.slots))

    def views(self, buffer) -> dict[str, np.ndarray]:
        S, m = self.num_shards, self.num_workers
        ints = np.ndarray((self.counters,), np.int64, buffer)
        floats = np.ndarray((self.size * (1 + m + len(self.slots)),), np.float32, buffer, 8 * self.counters)
        out = {"versions": ints[:S], "steps": ints[S:2 * S],
               "arrived": ints[2 * S:2 * S + m * S].reshape(m, S),
               "tally": ints[2 * S + m * S:].reshape(m, S, len(_TALLY) + _STALENESS_BINS),
               "params": floats[:self.size], "grads": floats[self.size:self.size * (1 + m)].reshape(m, self.size)}
        for k, slot in enumerate(self.slots):
            out[slot] = floats[self.size * (1 + m + k):self.size * (2 + m + k)]
        return out


class SpreadShards:
    """The driver's side: creates and owns the segment; a ``ShardGroup`` the driver reads and
    checkpoints like any other. Refused unless the rule is synchronous over ``num_workers`` and
    the CPU keeps stores in order."""

    def __init__(self, spec: ServerSpec, params: np.ndarray, num_workers: int, timeout_s: float):
        if spec.rule != UpdateRule.synchronous(num_workers):
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
        """Each shard's counters, as a :class:`~gorila.params.ParameterShard` counts them (a push
        more than 15 versions behind is counted as 15 in the staleness histogram)."""
        out = []
        for j in range(len(self.slices)):
            tally = self.views["tally"][:, j].sum(axis=0)
            fields = {name: int(tally[k]) for k, name in enumerate(_TALLY) if name != "streak"}
            staleness = Counter({s: int(n) for s, n in enumerate(tally[len(_TALLY):]) if n})
            out.append(ShardStats(**fields, updates=int(self.views["versions"][j]), staleness=staleness))
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
        shards = split_shard_state(state, self.spec.num_shards)
        for j, shard in enumerate(shards):  # all checked before any is taken
            check_state(shard, j)
        for j, (part, shard) in enumerate(zip(self.slices, shards)):
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
        """One worker's gradient for this round, judged as a shard judges it. ``tag`` is not
        needed: each worker writes its own row of the round, so a repeat overwrites itself, and a
        spread server is never restarted."""
        views, j, part = self.views, self.shard_id, self.part
        check_push(grad, version, part.stop - part.start, j)
        current = int(views["versions"][j])
        tally = views["tally"][worker_id, j]
        verdict = judge_push(self.spec.rule, current, grad, version, int(tally[_STREAK]),
                             nonfinite_limit=self.spec.nonfinite_limit, shard_id=j, worker_id=worker_id)
        _count(tally, verdict, grad.nbytes)
        if verdict.reason is not None:  # rejected: nothing joins; a pusher behind gets fresh parameters
            fresh = (views["params"][part].copy()
                     if version < current and (tag is None or tag.reply_params) else None)
            tally[_BYTES_OUT] += 0 if fresh is None else fresh.nbytes
            return Done(PushResult("rejected", False, current, verdict.staleness, verdict.reason, fresh))
        views["grads"][worker_id, part] = grad
        views["arrived"][worker_id, j] = version + 1  # after the gradient: the owner reads it next
        return _Round(self, version, worker_id)

    def pull(self) -> Done[tuple[np.ndarray, int]]:
        return Done((self.views["params"][self.part].copy(), int(self.views["versions"][self.shard_id])))

    def version(self) -> Done[int]:
        return Done(int(self.views["versions"][self.shard_id]))

    def wait_version(self, at_least: int, wait_s: float) -> Done[int]:
        """The version at once: the server has no process of its own to block in."""
        return Done(int(self.views["versions"][self.shard_id]))

    def connect(self) -> None:
        """Attach to the segment and build the shard's optimizer."""
        self.views

    def apply(self, version: int) -> None:
        """The owner's part of a round: wait for every worker's gradient, apply the shard's round
        (every worker's push counts, so the rule's aggregate is reached), publish ``version + 1``."""
        views, j, part = self.views, self.shard_id, self.part
        m = self.layout.num_workers
        wait_until(lambda: (views["arrived"][:, j] == version + 1).all(), self.timeout_s,
                   f"shard {j} waited for every worker's gradient of version {version}")
        self._optimizer.steps = int(views["steps"][j])
        total = views["grads"][:, part].sum(axis=0, dtype=np.float32)
        if apply_round(views["params"][part], self._optimizer, self.spec.rule, total, joined=m,
                       counted=m) == "rolled_back":  # the version moves on all the same, as a shard's does
            views["tally"][j % m, j, _ROLLED_BACK] += 1  # the owner's row: it alone writes it
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
        params = endpoint.views["params"][endpoint.part]
        endpoint.views["tally"][self.worker_id, j, _BYTES_OUT] += params.nbytes
        return PushResult("counted", owner, self.version + 1, 0, None, params)


def _count(tally: np.ndarray, verdict: Verdict, nbytes: int) -> None:
    """Count a judged push in its worker's row, field by field as a shard counts it."""
    tally[_BYTES_IN] += nbytes
    tally[len(_TALLY) + min(verdict.staleness, _STALENESS_BINS - 1)] += 1
    tally[_STREAK] = verdict.streak
    tally[{"stale": _STALE, "nonfinite": _NONFINITE, None: _COUNTED}[verdict.reason]] += 1


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
