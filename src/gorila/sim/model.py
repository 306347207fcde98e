"""A discrete-event model (SimPy) of workers, parameter shards, node caches and the network.

Every push is decided by real :class:`~gorila.params.ParameterShard` objects holding one
parameter each: the :class:`~gorila.params.UpdateRule` classifies it (counted / accepted /
rejected), the shard aggregates and advances its version, and keeps the staleness histogram,
exactly as in a run; the barrier is :meth:`ShardHost.must_wait`. What the model adds is time:

* a worker computes a gradient in a time drawn from the measured samples (a straggler's
  gradient takes ``factor`` times as long), then pushes every shard its slice;
* a message costs ``latency + bytes / bandwidth`` and holds the sending or receiving shard's
  (or cache's) link for ``bytes / bandwidth``: that is where many workers queue;
* a shard applies one push at a time (the measured apply time for its slice);
* the reply carries the shard's parameters whenever the pusher is behind; with a barrier it
  comes once the next version exists; under a pipelined rule (:attr:`UpdateRule.pipelined`: the
  asynchronous ones) and a ``pipelined`` workload the worker computes its next gradient while the
  reply travels, on the parameters it has; otherwise it waits for the reply (the semi-async client);
* with a parameter cache per node (``param_cache``), replies carry no parameters: each shard sends
  each node's cache every new version (the newest when its last send is done, as a run's shards
  do), and workers read the cache (``cache_read_s``).

::

    setup = Setup(rule=UpdateRule.synchronous(4), workers=4, shards=1, workload=work, cluster=cluster,
                  apply_s=(2e-5,))
    prediction = simulate(setup, seed=0)
    prediction.updates_per_s, prediction.staleness_mean
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from gorila.params import ParameterShard, ShardStats, UpdateRule
from gorila.params.layout import ShardLayout
from gorila.runtime.shard_host import ShardHost
from gorila.sim.calibration import Workload
from gorila.sim.cluster import Cluster

FLOAT_BYTES = 4
ACK_BYTES = 64  # a reply without parameters: outcome and version
_GRAD = np.zeros(1, np.float32)  # each simulated shard holds one parameter: the rule needs no more


@dataclass(frozen=True)
class Stragglers:
    """``probability`` of a gradient taking ``factor`` times as long; ``--stragglers P:F``."""

    probability: float = 0.0
    factor: float = 1.0


@dataclass(frozen=True)
class Setup:
    """One point of a sweep: the rule, how many workers and shards, what a gradient costs
    (``workload``, ``apply_s`` per shard), the cluster, and what slows it. ``slow_worker``:
    worker 0's every gradient takes this many times as long (an injected straggler).
    ``gradients``: how many pushes to simulate; the first ``warmup`` fraction of them, and at least
    one per worker (each worker's first gradient is on version 0), are not measured."""

    rule: UpdateRule
    workers: int
    shards: int
    workload: Workload
    cluster: Cluster
    apply_s: tuple[float, ...]
    param_cache: bool = False
    stragglers: Stragglers = Stragglers()
    slow_worker: float = 1.0
    gradients: int = 2000
    warmup: float = 0.1


@dataclass(frozen=True)
class Prediction:
    """What one simulated point predicts (rates per simulated second, after the warm-up).

    ``shard_busy`` and ``shard_link_busy``: the busiest shard's fraction of time applying pushes
    and sending or receiving; ``cache_versions_per_s`` (per cache: one per version per shard, at most)
    and ``cache_reads_per_s`` (per cache: its workers' reads); ``bytes_per_update``: every byte
    moved (pushes, replies, versions sent to the caches) per update of the parameters."""

    workers: int
    updates_per_s: float
    gradients_per_s: float
    env_steps_per_s: float
    staleness: dict[int, int]
    staleness_mean: float
    rejected_fraction: float
    shard_busy: float
    shard_link_busy: float
    cache_versions_per_s: float
    cache_reads_per_s: float
    bytes_per_update: float
    seconds: float


class _Queue:
    """Something that serves one thing at a time, first come first served: a shard's or a
    cache's link, a shard's apply loop. ``free_at`` is when it finishes what it was given, so a
    wait is one timeout (no request and release events)."""

    def __init__(self, env: simpy.Environment):
        self.env = env
        self.free_at = 0.0
        self.busy = 0.0

    def hold(self, seconds: float, then: float = 0.0) -> Generator[simpy.Event, Any, None]:
        """Wait for the turn, hold it for ``seconds``, then ``then`` more seconds (not held)."""
        self.free_at = max(self.env.now, self.free_at) + seconds
        self.busy += seconds
        yield self.env.timeout(self.free_at - self.env.now + then)


class _Link(_Queue):
    """One side of the network that queues: a shard's link."""

    def __init__(self, env: simpy.Environment, cluster: Cluster):
        super().__init__(env)
        self.cluster = cluster
        self.bytes = 0

    def transfer(self, nbytes: int) -> Generator[simpy.Event, Any, None]:
        """A message through this link: ``bytes / bandwidth`` on the wire, then the latency."""
        self.bytes += nbytes
        yield from self.hold(nbytes / self.cluster.bandwidth_Bps, then=self.cluster.latency_s)


class _Shard:
    """A real :class:`ParameterShard` (one parameter) with its link, its apply queue, and an
    event for each new version."""

    def __init__(self, env: simpy.Environment, rule: UpdateRule, shard_id: int, slice_bytes: int, apply_s: float,
                 cluster: Cluster):
        self.env = env
        self.shard = ParameterShard(np.zeros(1, np.float32), rule=rule, optimizer="sgd", lr=0.1, shard_id=shard_id)
        self.host = ShardHost(self.shard, barrier_timeout_s=float("inf"))  # its must_wait is the barrier
        self.link = _Link(env, cluster)
        self.cpu = _Queue(env)
        self.slice_bytes, self.apply_s = slice_bytes, apply_s
        self.advanced = env.event()

    @property
    def version(self) -> int:
        return self.shard.version

    def wait_beyond(self, version: int) -> Generator[simpy.Event, Any, None]:
        while self.shard.version <= version:
            yield self.advanced

    def push(self, worker_id: int, version: int, param_cache: bool) -> Generator[simpy.Event, Any, int]:
        """One worker's slice, from its arrival to its reply; returns the version the worker holds."""
        yield from self.link.transfer(self.slice_bytes)
        yield from self.cpu.hold(self.apply_s)  # first come, first applied: the shard's lock
        result = self.shard.push(_GRAD, version, worker_id)
        if result.applied:
            self.advanced.succeed()
            self.advanced = self.env.event()
        if self.host.must_wait(result, version):
            yield from self.wait_beyond(version)
        behind = version < self.shard.version
        yield from self.link.transfer(self.slice_bytes if behind and not param_cache else ACK_BYTES)
        return self.shard.version if behind else version


class _Cache:
    """A node's parameter cache: sent each new version of each shard once, serves its workers."""

    def __init__(self, env: simpy.Environment, shards: list[_Shard], cluster: Cluster):
        self.env, self.shards = env, shards
        self.versions = [0] * len(shards)
        self.updated = env.event()
        self.taken = 0
        self.reads = 0
        for i in range(len(shards)):
            env.process(self._follow(i))

    def _follow(self, i: int) -> Generator[simpy.Event, Any, None]:
        shard = self.shards[i]
        while True:
            yield from shard.wait_beyond(self.versions[i])
            version = shard.version  # the newest: versions that came and went meanwhile are skipped
            yield from shard.link.transfer(shard.slice_bytes)
            self.taken += 1
            self.versions[i] = version
            self.updated.succeed()
            self.updated = self.env.event()

    def read(self, at_least: list[int], cost_s: float) -> Generator[simpy.Event, Any, list[int]]:
        """A worker's read: waits until the cache holds ``at_least`` of every shard."""
        while any(v < need for v, need in zip(self.versions, at_least)):
            yield self.updated
        yield self.env.timeout(cost_s)
        self.reads += 1
        return list(self.versions)


class _Run:
    """The simulation of one :class:`Setup` (built and run by :func:`simulate`)."""

    def __init__(self, setup: Setup, seed: int):
        self.setup = setup
        self.env = simpy.Environment()
        self.rng = np.random.default_rng(seed)
        cluster = setup.cluster
        layout = ShardLayout(setup.workload.params, setup.shards)
        self.shards = [_Shard(self.env, setup.rule, i, (sl.stop - sl.start) * FLOAT_BYTES,
                              setup.apply_s[i], cluster) for i, sl in enumerate(layout.slices)]
        self.caches = ([_Cache(self.env, self.shards, cluster) for _ in range(cluster.nodes)]
                       if setup.param_cache else [])
        per_node = -(-setup.workers // cluster.nodes)
        concurrent = min(per_node, cluster.cores_per_node)
        # More workers than cores on a node share them: each computes that much slower.
        self.samples = setup.workload.samples(concurrent, setup.workers) * max(1.0, per_node / cluster.cores_per_node)
        self.pipelined = setup.workload.pipelined and setup.rule.pipelined
        self.pushes = 0
        self.finished = self.env.event()
        self.mark = self._snapshot()  # replaced once the warm-up is over
        self.warmup = min(max(1, int(setup.gradients * setup.warmup), setup.workers), setup.gradients - 1)
        for k in range(setup.workers):
            self.env.process(self._worker(k))

    def _compute_s(self, worker_id: int) -> float:
        t = float(self.rng.choice(self.samples))
        if self.rng.random() < self.setup.stragglers.probability:
            t *= self.setup.stragglers.factor
        return t * self.setup.slow_worker if worker_id == 0 else t

    def _worker(self, k: int) -> Generator[simpy.Event, Any, None]:
        cache = self.caches[k % len(self.caches)] if self.caches else None
        versions = [0] * len(self.shards)  # every worker pulls version 0 before training starts
        in_flight: simpy.Process | None = None
        while True:
            if cache is not None:
                versions = yield from cache.read(versions, self.setup.cluster.cache_read_s)
            elif in_flight is not None and in_flight.processed:  # params(): a reply already here is taken
                # a processed push's value is its versions' list, which simpy types as optional
                versions, in_flight = in_flight.value, None  # type: ignore[assignment]  # simpy: value optional
            computed_on = list(versions)
            yield self.env.timeout(self._compute_s(k))
            if in_flight is not None:  # push(): the previous reply first
                arrived = yield in_flight
                versions = versions if cache is not None else arrived
            in_flight = self.env.process(self._push(k, computed_on))
            if not self.pipelined:
                arrived = yield in_flight
                in_flight = None
                # With a cache the reply carries no parameters: the next read waits for what it says exists.
                versions = arrived if cache is None or self.setup.rule.barrier else versions

    def _push(self, k: int, computed_on: list[int]) -> Generator[simpy.Event, Any, list[int]]:
        replies = [self.env.process(s.push(k, v, self.setup.param_cache)) for s, v in zip(self.shards, computed_on)]
        done = yield simpy.AllOf(self.env, replies)
        self._count()
        return [done[r] for r in replies]

    def _count(self) -> None:
        self.pushes += 1
        if self.pushes == self.warmup:
            self.mark = self._snapshot()
        if self.pushes == self.setup.gradients:
            self.finished.succeed()

    def _snapshot(self) -> dict[str, Any]:
        stats = ShardStats()
        for s in self.shards:
            stats = stats.merge(s.shard.stats)
        return {"time": self.env.now, "pushes": self.pushes, "stats": stats,
                "updates": sum(s.shard.stats.updates for s in self.shards) / len(self.shards),
                "busy": [s.cpu.busy for s in self.shards], "link_busy": [s.link.busy for s in self.shards],
                "bytes": sum(s.link.bytes for s in self.shards),
                "taken": sum(c.taken for c in self.caches), "reads": sum(c.reads for c in self.caches)}

    def run(self) -> Prediction:
        self.env.run(until=self.finished)
        start, end = self.mark, self._snapshot()
        seconds = max(end["time"] - start["time"], 1e-12)
        counted = Counter(end["stats"].staleness)
        counted.subtract(start["stats"].staleness)
        staleness = {int(s): int(n) for s, n in sorted(counted.items()) if n > 0}
        total = sum(staleness.values())
        rejected = end["stats"].pushes_rejected - start["stats"].pushes_rejected
        updates = end["updates"] - start["updates"]
        gradients = end["pushes"] - start["pushes"]
        caches = max(len(self.caches), 1)
        return Prediction(
            workers=self.setup.workers, updates_per_s=updates / seconds, gradients_per_s=gradients / seconds,
            env_steps_per_s=gradients * self.setup.workload.env_steps(self.setup.workers) / seconds,
            staleness=staleness,
            staleness_mean=sum(s * n for s, n in staleness.items()) / total if total else 0.0,
            rejected_fraction=rejected / max(sum(n for n in staleness.values()), 1),
            shard_busy=max(b - a for a, b in zip(start["busy"], end["busy"])) / seconds,
            shard_link_busy=max(b - a for a, b in zip(start["link_busy"], end["link_busy"])) / seconds,
            cache_versions_per_s=(end["taken"] - start["taken"]) / caches / seconds,
            cache_reads_per_s=(end["reads"] - start["reads"]) / caches / seconds,
            bytes_per_update=(end["bytes"] - start["bytes"]) / max(updates, 1e-12), seconds=seconds)


def simulate(setup: Setup, seed: int = 0) -> Prediction:
    """Run one setup until ``setup.gradients`` pushes are answered; see the module doc."""
    return _Run(setup, seed).run()
