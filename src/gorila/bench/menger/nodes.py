"""The simulated nodes of ``gorila bench menger``: processes whose threads are the actors.

A :class:`ReaderNode` is one node's actors reading the newest parameters (from the server, or from
that node's cache); a :class:`WriterNode` one node's actors adding rows to replay. Each is a service
object (``runtime.start_services``), so the threads run in a process of their own, as a node's
actors do, and report every call's latency.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import numpy as np

from gorila.params import ParameterServer
from gorila.params.cache import CachedSource, CacheSpec, ParamCache
from gorila.replay import RemoteReplay
from gorila.types import Transitions


def node_name(node: int) -> str:
    """A simulated node's key: its caches' shared memory is named after it."""
    return f"sim{node}"


def bench_cache(server: ParameterServer, spec: CacheSpec, pushed: bool, node: int) -> ParamCache:
    """Simulated node ``node``'s cache (a service factory, run in the service's process): sent
    each version by the server (``pushed``, as a run's caches are), or polling it."""
    endpoint = None
    if pushed:
        from gorila.runtime.ray_processes import this_service  # Ray: in the service's process only

        endpoint = this_service(f"bench cache {node}")
    cache = ParamCache(server.upstream(), spec.shm_name(node_name(node)), spec.size, spec.wait_s, endpoint)
    cache.refresh()
    return cache.start()


def _run_threads(count: int, body: Callable[[int, list[float], threading.Barrier], None]) -> list[list[float]]:
    """``body(k, latencies)`` on ``count`` threads started together; each thread's latencies."""
    out: list[list[float]] = [[] for _ in range(count)]
    start = threading.Barrier(count)
    threads = [threading.Thread(target=body, args=(k, out[k], start), daemon=True) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


class ReaderNode:
    """One simulated node's reading actors (threads)::

        node = ReaderNode(server, node=1, buffers=8)
        node.read(threads=256, spec=cache_spec, cached=True, seconds=2.0)   # {"latencies_s": [...], ...}

    Without a cache a read is what a ``ParameterClient``'s pull does: every shard's slice asked of
    the server at once, each copied into the reader's vector as it comes; with one it is a
    :class:`CachedSource`'s read of the node's shared memory. Reader ``k`` copies into vector
    ``k % buffers`` of the node: every read still moves the whole model, but hundreds of readers of
    a 16 MB model do not need a copy each in this one machine's memory.
    """

    def __init__(self, server: ParameterServer, node: int, buffers: int = 8):
        self.server, self.node = server, node
        self.buffers = [np.zeros(server.layout.size, np.float32) for _ in range(buffers)]

    def _server_read(self, out: np.ndarray) -> int:
        parts = self.server.layout.split(out)
        pending = [endpoint.pull() for endpoint in self.server.endpoints]
        versions = []
        for part, reply in zip(parts, pending):
            params, version = reply.result(self.server.timeout_s)
            np.copyto(part, params)
            versions.append(version)
        return min(versions)

    def read(self, threads: int, spec: CacheSpec, cached: bool, seconds: float) -> dict:
        """Every read's latency, and when it ended (``time.time()``, comparable with the learner's
        clock on one machine) with the version it read; the reads that reached the server.
        ``cached``: through this node's cache of ``spec``."""
        spec = replace(spec, locate=partial(node_name, self.node))
        server_reads = [0] * threads
        ends: list[list[tuple[float, int]]] = [[] for _ in range(threads)]

        def body(k: int, latencies: list[float], start: threading.Barrier) -> None:
            out = self.buffers[k % len(self.buffers)]
            source = CachedSource(spec, self.server.client(k), out=out) if cached else None

            def read() -> int:
                if source is None:
                    return self._server_read(out)
                source.pull()
                return source.version

            read()  # warm-up: connections, page faults
            start.wait()
            deadline = time.perf_counter() + seconds
            while (began := time.perf_counter()) < deadline:
                version = read()
                latencies.append(time.perf_counter() - began)
                ends[k].append((time.time(), version))
            server_reads[k] = source.server_reads if source is not None else len(latencies)
            if source is not None:
                source.close()

        latencies = _run_threads(threads, body)
        read_at = np.array([t for per in ends for t, _ in per], float)
        versions = np.array([v for per in ends for _, v in per], np.int64)
        return {"latencies_s": [x for per in latencies for x in per], "server_reads": sum(server_reads),
                "read_at": read_at, "versions": versions}


class WriterNode:
    """One simulated node's writing actors: each thread adds one row of ``payload`` bytes at a
    time to its replay shard (writer ``k`` of the run to shard ``k % shards``)::

        node = WriterNode(node=0, nodes=2)
        node.write(endpoints, writers=64, payload=1 << 20, seconds=2.0, tag="1M-64")  # {"latencies_s": [...]}
    """

    def __init__(self, node: int, nodes: int):
        self.node, self.nodes = node, nodes

    def write(self, endpoints: list, writers: int, payload: int, seconds: float, tag: str = "") -> dict:
        mine = list(range(self.node, writers, self.nodes))  # writers of the run on this node
        if not mine:
            return {"latencies_s": []}
        half = payload // 2  # obs and next_obs
        rng = np.random.default_rng(self.node)
        obs = rng.integers(0, 255, (1, half), dtype=np.uint8)
        row = Transitions(obs, np.zeros(1, np.int64), np.zeros(1, np.float32), obs.copy(), np.zeros(1, bool),
                          np.zeros(1, bool), np.zeros(1, np.int64), policy_version=np.zeros(1, np.int64),
                          discount=np.ones(1, np.float32), steps=np.ones(1, np.int64))

        def body(k: int, latencies: list[float], start: threading.Barrier) -> None:
            writer = mine[k]
            replay = RemoteReplay(endpoints[writer % len(endpoints)])
            name = f"writer{writer}-{tag}"
            replay.add(row, name, 0).result(600.0)  # warm-up
            start.wait()
            seq, deadline = 1, time.perf_counter() + seconds
            while (began := time.perf_counter()) < deadline:
                replay.add(row, name, seq).result(600.0)
                latencies.append(time.perf_counter() - began)
                seq += 1

        latencies = _run_threads(len(mine), body)
        return {"latencies_s": [x for per in latencies for x in per]}
