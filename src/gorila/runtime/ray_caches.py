"""The parameter caches on a Ray cluster: one service process per node, pinned there, each
holding a :class:`~gorila.params.cache.ParamCache` in that node's shared memory, and with a rack
tier (:class:`~gorila.params.tiers.CacheTiers`) one more per rack, on the rack's first node, that
the rack's node caches read instead of the server. Each cache subscribes to its upstream with its
own endpoint, so the shards (or the rack cache) send it every new version. The runtime starts them
and keeps them with its other processes::

    server, caches = runtime.start_param_caches(shards.server, tiers)   # start_caches(...) inside
    runtime.start_workers(factory, 8, server, name="actor")             # server.source(k): node k's cache
    caches["param_cache"].stats()                                       # pushes, pulls, bytes per version, ...
"""

from __future__ import annotations

import functools
from typing import Any

import ray

from gorila.params import ParameterServer
from gorila.params.cache import CacheSpec, HasUpstream, ParamCache, serve_node_cache
from gorila.params.tiers import CacheTiers, RemoteCache
from gorila.runtime.placement import node_id, pinned
from gorila.runtime.ray_calls import NamedActor
from gorila.runtime.ray_processes import RayServices, ServiceProcess, this_service, titled

# Mostly asleep in a wait at its upstream: a small CPU share leaves the CPUs to the workers.
CACHE_CPUS = 0.01
# A rack cache answers the long-polls of its node caches while it waits at the server itself:
# its process serves calls on threads (the node caches' waits, pulls, stats at once).
CACHE_CONCURRENCY = 32


class RayCaches(RayServices):
    """The parameter caches of one tier, one per node (or rack): closed (their shared memory
    unlinked) before the runtime kills its processes."""

    def close(self) -> None:
        refs = [h.call.remote("close") for h in self.handles]
        ray.wait(refs, num_returns=len(refs), timeout=self.timeout_s)


def start_caches(server: ParameterServer, prefix: str, wait_s: float, nodes: list[str], names: list[str],
                 call_timeout_s: float, options: dict[str, Any],
                 tiers: CacheTiers = CacheTiers()) -> tuple[CacheSpec, dict[str, RayCaches]]:
    """A cache process on each of ``nodes`` (named ``names``: one per node, then one per rack),
    sent each version by ``server`` or, with a rack tier, by its rack's cache; ``options`` are the
    runtime's Ray options for a process (restarts, its environment). Returns what workers need to
    find their node's cache, and the tiers' groups (``param_cache``, ``rack_cache``), still starting."""
    spec = CacheSpec(prefix=prefix, size=server.layout.size, locate=node_id, wait_s=wait_s)
    upstreams: list[HasUpstream] = [server] * len(nodes)
    groups: dict[str, RayCaches] = {}
    if tiers.rack:
        # Its own segment name: the node cache of the rack's first node maps that node's name.
        rack_spec = CacheSpec(prefix=f"{prefix}-rack", size=spec.size, locate=node_id, wait_s=wait_s)
        racks = tiers.racks(len(nodes))
        rack_names = names[len(nodes):]
        handles = [_cache(f"rack-cache-{r}", rack_names[r], functools.partial(_pushed_cache, server, rack_spec),
                          r, pinned(nodes, tiers.rack_node(r)), options) for r in range(racks)]
        groups["rack_cache"] = RayCaches(handles, "rack cache", call_timeout_s)
        endpoints = groups["rack_cache"].endpoints()
        upstreams = [RemoteCache(endpoints[tiers.rack_of(k)], call_timeout_s) for k in range(len(nodes))]
    handles = [_cache(f"param-cache-{k}", names[k], functools.partial(_pushed_cache, upstreams[k], spec), k,
                      pinned(nodes, k), options) for k in range(len(nodes))]
    groups["param_cache"] = RayCaches(handles, "param cache", call_timeout_s)
    return spec, groups


def _pushed_cache(upstream: HasUpstream, spec: CacheSpec, service_id: int) -> ParamCache:
    """A node's (or a rack's) cache, built in its process, to which ``upstream`` sends each version."""
    return serve_node_cache(upstream, spec, service_id, endpoint=this_service(f"param cache {service_id}"))


def _cache(title: str, name: str, factory: Any, index: int, placement: dict, options: dict) -> NamedActor:
    return NamedActor(titled(ServiceProcess, title)
                      .options(num_cpus=CACHE_CPUS, max_concurrency=CACHE_CONCURRENCY, name=name, **placement,
                               **options)
                      .remote(factory, index, False), name)  # not serial: its calls on threads
