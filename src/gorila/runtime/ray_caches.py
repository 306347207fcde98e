"""The parameter caches on a Ray cluster: one service process per node, pinned there, each
holding a :class:`~gorila.params.cache.ParamCache` in that node's shared memory::

    server, caches = runtime.start_param_caches(shards.server)
    runtime.start_workers(factory, 8, server, name="actor")   # server.source(k): node k's cache
    caches.call("stats")                                       # pulls, bytes per version, ...
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import TYPE_CHECKING

import ray

from gorila.params import ParameterServer
from gorila.params.cache import CacheSpec, serve_node_cache
from gorila.runtime.placement import alive_nodes, node_id, pinned
from gorila.runtime.ray_calls import NamedActor
from gorila.runtime.ray_runtime import RayServices, _ServiceProcess

if TYPE_CHECKING:
    from gorila.runtime.ray_runtime import RayRuntime

# Mostly asleep between probes: a small CPU share leaves the CPUs to the workers.
CACHE_CPUS = 0.01


class RayCaches(RayServices):
    """The parameter caches, one per node: closed (their shared memory unlinked) before the
    runtime kills its processes."""

    def close(self) -> None:
        refs = [h.call.remote("close") for h in self.handles]
        ray.wait(refs, num_returns=len(refs), timeout=self.timeout_s)


def start_param_caches(runtime: RayRuntime, server: ParameterServer,
                       poll_s: float) -> tuple[ParameterServer, RayCaches]:
    """A cache on every alive node (restarted by Ray when it dies); ``server`` with their address."""
    nodes = alive_nodes()
    spec = CacheSpec(prefix=f"gorila-{runtime._tag}-params", size=server.layout.size, locate=node_id, poll_s=poll_s)
    factory = functools.partial(serve_node_cache, server, spec)
    handles = [NamedActor(_ServiceProcess.options(num_cpus=CACHE_CPUS, max_restarts=runtime.max_restarts,
                                                   max_task_retries=3, name=actor, **pinned(nodes, k),
                                                   **runtime._env()).remote(factory, k), actor)
               for k, actor in enumerate(runtime._names("param-cache", len(nodes)))]
    runtime._handles += handles
    group = RayCaches(handles, "param cache", runtime.call_timeout_s)
    runtime._shard_groups.append(group)
    runtime._starting(group, [h.ready.remote() for h in handles], f"{len(nodes)} parameter caches", wait=False)
    return replace(server, cache=spec), group
