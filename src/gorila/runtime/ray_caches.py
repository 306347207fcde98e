"""The parameter caches on a Ray cluster: one service process per node, pinned there, each
holding a :class:`~gorila.params.cache.ParamCache` in that node's shared memory. The runtime
starts them and keeps them with its other processes::

    server, caches = runtime.start_param_caches(shards.server)   # start_caches(...) inside
    runtime.start_workers(factory, 8, server, name="actor")      # server.source(k): node k's cache
    caches.stats()                                                # pulls, bytes per version, ...
"""

from __future__ import annotations

import functools
from typing import Any

import ray

from gorila.params import ParameterServer
from gorila.params.cache import CacheSpec, serve_node_cache
from gorila.runtime.placement import node_id, pinned
from gorila.runtime.ray_calls import NamedActor
from gorila.runtime.ray_processes import RayServices, ServiceProcess, titled

# Mostly asleep between probes: a small CPU share leaves the CPUs to the workers.
CACHE_CPUS = 0.01


class RayCaches(RayServices):
    """The parameter caches, one per node: closed (their shared memory unlinked) before the
    runtime kills its processes."""

    def close(self) -> None:
        refs = [h.call.remote("close") for h in self.handles]
        ray.wait(refs, num_returns=len(refs), timeout=self.timeout_s)


def start_caches(server: ParameterServer, prefix: str, poll_s: float, nodes: list[str], names: list[str],
                 call_timeout_s: float, options: dict[str, Any]) -> tuple[CacheSpec, RayCaches]:
    """A cache process on each of ``nodes`` (named ``names``, one each), pulling from ``server``;
    ``options`` are the runtime's Ray options for a process (restarts, its environment). Returns
    what workers need to find their node's cache, and the caches' group, still starting."""
    spec = CacheSpec(prefix=prefix, size=server.layout.size, locate=node_id, poll_s=poll_s)
    factory = functools.partial(serve_node_cache, server, spec)
    handles = [NamedActor(titled(ServiceProcess, f"param-cache-{k}")
                          .options(num_cpus=CACHE_CPUS, name=name, **pinned(nodes, k), **options)
                          .remote(factory, k), name)
               for k, name in enumerate(names)]
    return spec, RayCaches(handles, "param cache", call_timeout_s)
