"""What every runtime offers: place parameter shards and groups of workers, then run them.

A *worker* is a plain Python object built inside its process by a picklable factory::

    def factory(worker_id: int, endpoints: list[ShardEndpoint]) -> Worker: ...

    runtime = make_runtime("ray")                      # or "local"
    shards = runtime.start_shards(spec, initial_params)
    workers = runtime.start_workers(factory, count=4)  # each gets shards.endpoints
    reports = workers.run_steps(10)                    # every worker takes 10 steps
    runtime.shutdown()
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from gorila.params import Pending, ServerSpec, ShardEndpoint, ShardStats


class Worker(Protocol):
    """One unit of work that loops: an Actor, a Learner, a Bundle, an lstsq worker."""

    def step(self) -> None:
        """One iteration (e.g. compute a gradient and push it)."""

    def report(self) -> dict[str, Any]:
        """Cumulative counters since the worker was built (small, JSON-like)."""


WorkerFactory = Callable[[int, list[ShardEndpoint]], Worker]


class WorkerGroup(Protocol):
    """Workers of one kind, run together."""

    def run_steps(self, steps: int) -> list[dict[str, Any]]:
        """Every worker takes ``steps`` steps; returns each worker's ``report()``."""

    def reports(self) -> list[dict[str, Any]]:
        """Every worker's ``report()`` now (with process facts such as ``pid`` where there are processes)."""

    def start_steps(self, steps: int) -> list[Pending[dict[str, Any]]]:
        """Like :meth:`run_steps` without waiting: one pending report per worker."""

    def call(self, method: str, *args: Any) -> list[Any]:
        """Call ``method`` on every worker object and return the results in worker order."""

    def endpoints(self) -> list[ServiceEndpoint]:
        """A way for other workers to call these (e.g. actors adding to replay shards)."""


class ServiceEndpoint(Protocol):
    """How one worker calls a method of another (picklable; handed to factories)."""

    def call(self, method: str, *args: Any) -> Pending[Any]: ...


class ShardGroup(Protocol):
    """The placed shards of one parameter server."""

    endpoints: list[ShardEndpoint]

    def pull(self) -> tuple[np.ndarray, list[int]]:
        """The whole flat parameter vector and each shard's version."""

    def stats(self) -> list[ShardStats]: ...
    def state_dict(self) -> dict[str, np.ndarray]: ...
    def load_state_dict(self, state: dict[str, np.ndarray]) -> None: ...
    def cpu_seconds(self) -> float: ...


class Runtime(Protocol):
    """Where components run: ``LocalRuntime`` (one process) or ``RayRuntime``."""

    name: str

    def start_shards(self, spec: ServerSpec, params: np.ndarray) -> ShardGroup: ...
    def start_workers(self, factory: WorkerFactory, count: int, endpoints: list[ShardEndpoint],
                      *, name: str = "worker") -> WorkerGroup: ...
    def shutdown(self) -> None: ...


def shard_state(states: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Per-shard state dicts as one flat dict with ``shard<i>.`` prefixes (a checkpoint's layout)."""
    return {f"shard{i}.{k}": v for i, state in enumerate(states) for k, v in state.items()}


def split_shard_state(state: dict[str, np.ndarray], num_shards: int) -> list[dict[str, np.ndarray]]:
    """The inverse of :func:`shard_state`."""
    out: list[dict[str, np.ndarray]] = [{} for _ in range(num_shards)]
    for key, value in state.items():
        head, _, rest = key.partition(".")
        if head.startswith("shard"):
            out[int(head[len("shard"):])][rest] = value
    return out
