"""Runtimes place plain components: ``local`` (one process) or ``ray`` (Ray processes).

Only :mod:`gorila.runtime.ray_runtime` imports Ray, and only when a Ray runtime is made.
"""

from __future__ import annotations

from gorila.runtime.base import Runtime, ShardGroup, Worker, WorkerFactory, WorkerGroup
from gorila.runtime.local import LocalRuntime

RUNTIMES = ("local", "ray")


def make_runtime(name: str, address: str | None = None, **options) -> Runtime:
    """``make_runtime("local")`` or ``make_runtime("ray", address=None)`` (embedded Ray);
    ``options`` are :class:`RayRuntime`'s and mean nothing to the local runtime."""
    if name == "local":
        return LocalRuntime()
    from gorila.runtime.ray_runtime import RayRuntime

    return RayRuntime(address=address, **options)


__all__ = ["RUNTIMES", "LocalRuntime", "Runtime", "ShardGroup", "Worker", "WorkerFactory",
           "WorkerGroup", "make_runtime"]
