"""Everything in one process: the reference runtime, deterministic and easy to debug."""

from __future__ import annotations

from typing import Any

import numpy as np

from gorila.metrics.cputime import process_cpu_seconds
from gorila.params import Done, LocalEndpoint, ServerSpec, ShardEndpoint, ShardStats
from gorila.runtime.base import Worker, WorkerFactory, shard_state, split_shard_state


class LocalShards:
    """Shards as plain objects in this process."""

    def __init__(self, spec: ServerSpec, params: np.ndarray):
        self.layout = spec.layout(params.size)
        self.shards = spec.build(params)
        self.endpoints: list[ShardEndpoint] = [LocalEndpoint(s) for s in self.shards]

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
        return 0.0  # counted once, as the whole process's CPU time, by the caller


class LocalWorkers:
    """Workers stepped in turn, one step each per round, so a synchronous round completes
    before anyone computes on the next version (the barrier of the Ray runtime, without threads)."""

    def __init__(self, workers: list[Worker]):
        self.workers = workers

    def run_steps(self, steps: int) -> list[dict[str, Any]]:
        for _ in range(steps):
            for worker in self.workers:
                worker.step()
        return [w.report() for w in self.workers]

    def reports(self) -> list[dict[str, Any]]:
        return [w.report() for w in self.workers]

    def start_steps(self, steps: int) -> list[Done[dict[str, Any]]]:
        return [Done(r) for r in self.run_steps(steps)]

    def call(self, method: str, *args: Any) -> list[Any]:
        return [getattr(w, method)(*args) for w in self.workers]

    def endpoints(self) -> list[LocalService]:
        return [LocalService(w) for w in self.workers]


class LocalService:
    """Calls a method of an object in this process; the reply is immediate."""

    def __init__(self, target: Any):
        self.target = target

    def call(self, method: str, *args: Any) -> Done[Any]:
        return Done(getattr(self.target, method)(*args))


class LocalRuntime:
    """One process; ``cpu_seconds`` is this process's CPU time."""

    name = "local"

    def start_shards(self, spec: ServerSpec, params: np.ndarray) -> LocalShards:
        return LocalShards(spec, params)

    def start_workers(self, factory: WorkerFactory, count: int, endpoints: list[ShardEndpoint],
                      *, name: str = "worker") -> LocalWorkers:
        return LocalWorkers([factory(k, endpoints) for k in range(count)])

    def cpu_seconds(self) -> float:
        return process_cpu_seconds()

    def shutdown(self) -> None:
        pass
