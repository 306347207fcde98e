"""Tiers of parameter caches (Menger): a cache on every node, and with ``--cache-tiers node,rack``
one per rack of ``--nodes-per-rack`` nodes between them and the server::

    server ──► rack cache 0 ──► node caches of nodes 0 .. K-1 ──► their actors (shared memory)
           ──► rack cache 1 ──► node caches of nodes K .. 2K-1 ──► ...

so the server sends each version once per rack, not once per node, and each tier sends it on to
the tier below. A node cache reaches its rack's cache in another process through a service
endpoint (:class:`RemoteCache`) as it would the server (:class:`ServerUpstream`: the server as the
top tier's upstream): it subscribes there, and pulls only to catch up. The runtimes place the
tiers (``runtime.start_param_caches(server, tiers)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gorila import validate
from gorila.errors import ConfigError
from gorila.reply import ServiceEndpoint

if TYPE_CHECKING:
    from gorila.params.client import ParameterClient

#: ``--cache-tiers``: the node caches alone, or node caches that read rack caches.
CACHE_TIERS = ("node", "node,rack")


@dataclass(frozen=True)
class CacheTiers:
    """Which caches a run places between the server and its actors (a value object)::

        tiers = CacheTiers.parse("node,rack", nodes_per_rack=2)
        tiers.racks(nodes=3)      # 2 racks: nodes 0 and 1, node 2
        tiers.rack_of(2)          # 1
        tiers.rack_node(1)        # 2: a rack's cache lives on its first node

    ``CacheTiers()`` is the node tier alone (each node cache reads the server).
    """

    rack: bool = False
    nodes_per_rack: int = 1

    @classmethod
    def parse(cls, text: Any, nodes_per_rack: Any = None) -> CacheTiers:
        """The tiers ``--cache-tiers`` and ``--nodes-per-rack`` name; a :class:`ConfigError`
        naming the flag and what it allows otherwise."""
        validate.choice("cache_tiers", text, CACHE_TIERS)
        rack = text == "node,rack"
        if rack and nodes_per_rack is None:
            raise ConfigError("nodes_per_rack", "--cache-tiers node,rack needs the number of nodes whose caches "
                                                "read one rack cache: an integer >= 1")
        if not rack and nodes_per_rack is not None:
            raise ConfigError("nodes_per_rack", "groups nodes into racks of --cache-tiers node,rack; "
                                                f"with --cache-tiers {text} there are no rack caches")
        if rack:
            validate.integer("nodes_per_rack", nodes_per_rack, low=1)
        return cls(rack, nodes_per_rack if rack else 1)

    def racks(self, nodes: int) -> int:
        """How many racks ``nodes`` nodes make (the last one may be smaller)."""
        return -(-nodes // self.nodes_per_rack) if self.rack else 0

    def rack_of(self, node: int) -> int:
        return node // self.nodes_per_rack

    def rack_node(self, rack: int) -> int:
        """The node a rack's cache runs on: the rack's first."""
        return rack * self.nodes_per_rack

    def describe(self) -> str:
        return f"node,rack ({self.nodes_per_rack} nodes per rack)" if self.rack else "node"


@dataclass(frozen=True)
class RemoteCache:
    """A cache in another process (a rack's) as the next tier's upstream (picklable)::

        upstream = RemoteCache(rack_endpoint, timeout_s=60.0).upstream()
        upstream.subscribe(name, node_cache_endpoint, held)   # the rack cache sends it each version
        upstream.wait_version(v, wait_s=0.25)   # answered by the rack cache once it holds v
        flat, version = upstream.pull()

    Every call is bounded: a wait by its ``wait_s`` and the call timeout, a pull by the timeout.
    """

    endpoint: ServiceEndpoint
    timeout_s: float

    def upstream(self) -> RemoteCache:
        return self

    def wait_version(self, at_least: int, wait_s: float) -> int:
        return int(self.endpoint.call("wait_version", at_least, wait_s).result(wait_s + self.timeout_s))

    def pull(self) -> tuple[np.ndarray, int]:
        flat, version = self.endpoint.call("pull").result(self.timeout_s)
        return flat, int(version)

    def subscribe(self, name: str, endpoint: ServiceEndpoint, held: int) -> int:
        return int(self.endpoint.call("subscribe", name, endpoint, held).result(self.timeout_s))

    def slices(self, size: int) -> tuple[slice, ...]:
        return (slice(0, size),)


class ServerUpstream:
    """The parameter server as a cache's upstream: the version wait is each shard's own (a Ray
    shard answers when the version exists; no payload); the pull fetches every shard; a
    subscription is each shard's, which then sends its slice of every new version (picklable)."""

    def __init__(self, client: ParameterClient):
        self.client = client

    def wait_version(self, at_least: int, wait_s: float) -> int:
        return self.client.wait_version(at_least, wait_s)

    def pull(self) -> tuple[np.ndarray, int]:
        return self.client.pull(), self.client.version

    def subscribe(self, name: str, endpoint: ServiceEndpoint, held: int) -> int:
        """Subscribe ``endpoint`` at every shard; the server's version (its oldest shard's)."""
        pending = [shard.subscribe(name, endpoint, held) for shard in self.client.endpoints]
        return min(p.result(self.client.timeout_s) for p in pending)

    def slices(self, size: int) -> tuple[slice, ...]:
        return self.client.layout.slices
