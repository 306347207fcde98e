"""Runtimes place plain components: ``local`` (one process) or ``ray`` (Ray processes).

Only :mod:`gorila.runtime.ray_runtime` and the ``ray_*`` modules it uses import Ray, and only
when a Ray runtime is made. The protocols they implement are in :mod:`gorila.core`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gorila.core import Runtime

if TYPE_CHECKING:
    # the type checker sees the name itself (loaded on first use below), rather than `Any`
    from gorila.runtime.local import LocalRuntime

RUNTIMES = ("local", "ray")

#: One BLAS / torch thread per process (torch reads OMP_NUM_THREADS when it is imported), in the
#: environment a runtime's processes, and a benchmark's bare ones, inherit: parallelism comes from
#: processes, and oversubscribed threads would make every speedup measurement lie.
ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}

#: The ``--address`` that names this machine's own embedded Ray, as no address does (a resumed
#: run's ``config.json`` names the cluster it ran on: this overrides it).
EMBEDDED = "local"


def make_runtime(name: str, address: str | None = None, *, call_timeout_s: float = 600.0,
                 verbose: bool = False, stall_s: float | None = None) -> Runtime:
    """``make_runtime("local")`` or ``make_runtime("ray", address=None)`` (embedded Ray);
    ``verbose`` lets Ray's own logs through to the console; ``stall_s`` (``--actor-timeout-s``) is
    how long the local runtime lets a worker's step run before it rebuilds the worker (on Ray the
    driver restarts a stalled worker's process itself)."""
    if name == "local":
        from gorila.runtime.local import LocalRuntime

        return LocalRuntime(call_timeout_s=call_timeout_s, stall_s=stall_s)
    from gorila.runtime.ray_runtime import RayRuntime

    return RayRuntime(address=address, call_timeout_s=call_timeout_s, verbose=verbose)


def preload(name: str) -> None:
    """Import what ``make_runtime(name)`` imports (Ray, for ``ray``) now, so that a caller can have
    it done before it starts threads that import other modules."""
    if name != "local":
        import gorila.runtime.ray_runtime  # noqa: F401


if not TYPE_CHECKING:
    def __getattr__(name: str) -> object:
        # LocalRuntime when first asked for: a Ray worker process imports this package for its host
        # modules and never runs the local runtime, whose modules it need not load.
        if name == "LocalRuntime":
            from gorila.runtime.local import LocalRuntime

            return LocalRuntime
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["EMBEDDED", "ONE_THREAD", "RUNTIMES", "LocalRuntime", "make_runtime", "preload"]
