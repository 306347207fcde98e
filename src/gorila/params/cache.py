"""A parameter cache per node (Menger): each new version reaches every node once, and the actors of
that node read it from shared memory.

::

    learner ──push──► ParameterServer ── each new version, sent unasked (gorila.params.broadcast) ──┐
                      (or an owning learner's store)                                               ▼
                                        ParamCache (one per node) ── writes ──► SeqlockBuffer
                                                                                (node-local /dev/shm)
                                                                                   ▲  ▲  ▲
                                                    CachedSource of each actor ────┘  │  │  (reads)

A :class:`ParamCache`'s upstream is the server (:class:`~gorila.params.tiers.ServerUpstream`) or
another cache (chaining: :mod:`gorila.params.tiers`). Given an ``endpoint`` (how its upstream
reaches it), a started cache subscribes to its upstream, which then sends it every new version
(:meth:`ParamCache.deliver`): a *pushed* cache. It probes its upstream every ``wait_s`` (subscribing
again: a restarted upstream forgets its subscribers), and a cache that missed a push (it was
restarting, or a send failed) catches up by a pull, counted apart from the pushes. Without an
endpoint a cache *polls*: it learns of a new version by a long-poll, answered when that version
exists or after a bounded wait, and pulls each one (the local runtime's caches, refreshed before
each round, and ``gorila bench menger``'s comparison). Actors read through a :class:`CachedSource`
(``server.source(k)``; A3C's workers through ``server.client(k, cached=True)``), which reads the
server while the node's cache is gone.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from gorila.params.broadcast import Broadcast
from gorila.params.seqlock import SeqlockBuffer
from gorila.reply import ServiceEndpoint

# Between two asks of an upstream that answers at once (shards in one process, or spread over the
# workers of --server workers, cannot block): the probe period caches had before they long-polled.
NONBLOCKING_PAUSE_S = 0.005
_CATCH_UP_LOOK_S = 0.0005  # between a reader's looks at the header while its cache catches up
#: ``--param-cache``: ``node`` (a cache on every node) or ``none`` (actors pull from the server).
PARAM_CACHE_MODES = ("node", "none")


class Upstream(Protocol):
    """Where a cache gets the parameters: ``wait_version(v, wait_s)`` answers the upstream's version
    once it is at least ``v`` (or after ``wait_s``; no payload), ``pull()`` the whole vector;
    ``subscribe(name, endpoint, held)`` has it send each version after ``held`` to ``endpoint``
    (answering its version), in parts: ``slices(size)`` says which part each source index is."""

    def wait_version(self, at_least: int, wait_s: float) -> int: ...
    def pull(self) -> tuple[np.ndarray, int]: ...
    def subscribe(self, name: str, endpoint: ServiceEndpoint, held: int) -> int: ...
    def slices(self, size: int) -> tuple[slice, ...]: ...


class ServerReader(Protocol):
    """How a source reads the server while its cache is gone (a ``ParameterClient``)."""
    @property
    def version(self) -> int: ...
    def pull(self) -> np.ndarray: ...


class HasUpstream(Protocol):
    """What a node's cache is served from: a ``ParameterServer``, seen only through ``upstream()``
    (so this module needs nothing of the server's, which itself builds on the cache's parts)."""

    def upstream(self) -> Upstream: ...


@dataclass
class CacheStats:
    """A cache's counters: ``pushes`` the versions its upstream sent it unasked, ``pulls`` the
    versions it fetched (a pushed cache: its first, and each catch-up after a missed push), with
    their bytes; ``probes`` its asks of its upstream; ``served`` the reads it answered itself
    (chained caches, benches); ``versions`` the versions it held; ``bytes_per_version`` the bytes
    moved per version to this node."""

    probes: int = 0
    pushes: int = 0
    pulls: int = 0
    versions: int = 0
    bytes_pushed: int = 0
    bytes_pulled: int = 0
    served: int = 0
    errors: int = 0

    def as_dict(self) -> dict[str, float]:
        moved = self.bytes_pushed + self.bytes_pulled
        return {**vars(self), "bytes_per_version": moved / max(self.versions, 1)}


class ParamCache:
    """The parameter cache of one node: takes each new version once and keeps it in a
    :class:`SeqlockBuffer` that every reader on the node maps::

        cache = ParamCache(server.upstream(), name=spec.shm_name(node), size=n, endpoint=mine)
        cache.refresh()               # the newest version, pulled
        cache.start()                 # subscribed: upstream sends each new version (deliver)
        cache.wait_version(v, 0.25); cache.pull()  # it is an Upstream itself: caches chain
        cache.stats()                 # {"pushes": ..., "pulls": ..., "bytes_per_version": ...}
        cache.close()

    Pushed (``endpoint``): the thread subscribes at upstream every ``wait_s``; when upstream's
    version differs from the one held and no push brings it within another ``wait_s``, it pulls.
    Polled (no endpoint): the thread asks upstream for the version after the one it holds and
    blocks until upstream answers, at once when that version exists, else after ``wait_s``; an
    upstream that cannot block (shards in this process) is asked again after
    ``NONBLOCKING_PAUSE_S``. Either way another thread beats every ``wait_s``, so a live cache's
    heartbeat is never much older, however slow upstream is, and a failed call (the server
    restarting) is counted and tried again after ``wait_s``. Caches chained below this one
    subscribe to it, and it sends them each version it takes.
    """

    def __init__(self, upstream: Upstream, name: str, size: int, wait_s: float = 0.25,
                 endpoint: ServiceEndpoint | None = None):
        self.upstream, self.name, self.size, self.wait_s, self.endpoint = upstream, name, size, wait_s, endpoint
        self.buffer = SeqlockBuffer.create(name, size)
        self.counts = CacheStats()
        self._lock = threading.Lock()  # writes from the thread, deliveries and callers
        self._written = threading.Condition()  # notified on every new version: chained caches wait on it
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._staging = np.zeros(size, np.float32)  # the parts delivered, each at its own version
        self._slices = upstream.slices(size)
        self._part_versions = [-1] * len(self._slices)
        self._below: Broadcast | None = None  # the caches that read this one, once one subscribes

    def refresh(self, wait_s: float = 0.0) -> bool:
        """Ask upstream for a version past the one held, waiting up to ``wait_s`` for it; pull and
        publish it if upstream's version moved (on, or back: a restored server). Whether a new
        version was written."""
        self.counts.probes += 1
        latest = self.upstream.wait_version(self.buffer.version + 1, wait_s)
        if latest == self.buffer.version:
            with self._lock:
                self.buffer.beat(latest)
            return False
        self._pull()
        return True

    def _pull(self) -> None:
        with self._lock:
            flat, latest = self.upstream.pull()
            np.copyto(self._staging, flat)
            self._part_versions = [latest] * len(self._slices)
            self.counts.pulls += 1
            self.counts.bytes_pulled += flat.nbytes
            self._write(latest)

    def deliver(self, source: int, part: np.ndarray, version: int) -> None:
        """Take part ``source`` of ``slices`` at ``version``, sent by upstream unasked; the vector
        is written once every part has moved past the version held (its version: the oldest part's)."""
        with self._lock:
            np.copyto(self._staging[self._slices[source]], part)
            self._part_versions[source] = version
            self.counts.bytes_pushed += part.nbytes
            latest = min(self._part_versions)
            if latest != self.buffer.version and latest >= 0:
                self.counts.pushes += 1
                self._write(latest)

    def _write(self, version: int) -> None:
        """Publish the staged vector as ``version`` (the lock held) and tell whoever waits for one."""
        self.buffer.write(self._staging, version)
        self.buffer.beat(max(self._part_versions))
        self.counts.versions += 1
        if self._below is not None:
            self._below.advanced(version)
        with self._written:
            self._written.notify_all()

    def start(self) -> ParamCache:
        follow = self._follow if self.endpoint is not None else self._poll
        self._threads = [threading.Thread(target=follow, name="param-cache", daemon=True),
                         threading.Thread(target=self._beat, name="param-cache-beat", daemon=True)]
        for thread in self._threads:
            thread.start()
        return self

    def _beat(self) -> None:
        # Alive apart from upstream: a pull of a large model from a busy server can outlast a
        # reader's stale_after_s, and the node's readers must not all turn to the server meanwhile.
        while not self._stop.wait(self.wait_s):
            self.buffer.beat()

    def _poll(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                fresh = self.refresh(self.wait_s)
            except Exception:  # upstream down for a moment: keep serving the last version
                self.counts.errors += 1
                self._stop.wait(self.wait_s)
                continue
            if not fresh and time.monotonic() - began < self.wait_s:  # it answered at once: it cannot block
                self._stop.wait(NONBLOCKING_PAUSE_S)

    def _follow(self) -> None:
        while not self._stop.is_set():
            try:
                self.probe()
            except Exception:  # upstream down for a moment: keep serving the last version
                self.counts.errors += 1
            self._stop.wait(self.wait_s)

    def probe(self) -> bool:
        """A pushed cache's look at its upstream (its thread's, every ``wait_s``): subscribe there
        again (a restarted upstream has forgotten it), and when upstream's version is not the one
        held and no push brings it within ``wait_s``, pull it (a push missed: a failed send, this
        cache restarting). Whether it pulled."""
        if self.endpoint is None:
            raise ValueError(f"cache {self.name}: no endpoint to be sent versions at; it polls (refresh)")
        held = self.buffer.version
        self.counts.probes += 1
        latest = self.upstream.subscribe(self.name, self.endpoint, held)
        self.buffer.beat(latest)  # what its readers' staleness is counted against
        if latest == held or self._reaches(latest, held):
            return False
        self._pull()
        return True

    def _reaches(self, latest: int, held: int) -> bool:
        """Whether a push brings version ``latest`` (on from ``held``, or back) within ``wait_s``."""
        def arrived() -> bool:
            version = self.buffer.version
            return self._stop.is_set() or (version >= latest if latest > held else version != held)
        with self._written:
            return self._written.wait_for(arrived, timeout=self.wait_s)

    def version(self) -> int:
        return self.buffer.version

    def wait_version(self, at_least: int, wait_s: float) -> int:
        """The version held once it is ``at_least``, or after ``wait_s`` (a chained cache's long-poll)."""
        with self._written:
            self._written.wait_for(lambda: self.buffer.version >= at_least or self._stop.is_set(), timeout=wait_s)
        return self.buffer.version

    def subscribe(self, name: str, endpoint: ServiceEndpoint, held: int) -> int:
        """A chained cache's subscription (see :class:`Upstream`): each version this cache takes is sent on."""
        with self._lock:
            if self._below is None:
                self._below = Broadcast(self._current, 0, self.buffer.version, timeout_s=60.0, retry_s=self.wait_s)
            below = self._below
        return below.subscribe(name, endpoint, held)

    def slices(self, size: int) -> tuple[slice, ...]:
        return (slice(0, size),)

    def _current(self) -> tuple[np.ndarray, int]:
        out = np.empty(self.size, np.float32)
        return out, self.buffer.read(out)

    def stats(self) -> dict[str, float]:
        """Its counters (a service's ``stats()``), with ``sent``: the versions it sent the caches below."""
        return {**self.counts.as_dict(), "sent": 0 if self._below is None else self._below.sends}

    def pull(self) -> tuple[np.ndarray, int]:
        flat, version = self._current()
        self.counts.served += 1
        return flat, version

    def close(self) -> None:
        self._stop.set()
        with self._written:
            self._written.notify_all()  # chained caches waiting here answer now
        if self._below is not None:
            self._below.close()
        for thread in self._threads:
            thread.join(timeout=10.0)
        self.buffer.close()


def this_host() -> str:
    """The node key outside Ray: this machine's name."""
    return socket.gethostname()


@dataclass(frozen=True)
class CacheSpec:
    """How a process finds its node's cache (picklable; part of the ``ParameterServer``)::

        spec = CacheSpec(prefix="gorila-1a2b3c4d-params", size=n, locate=this_host)
        spec.shm_name(spec.locate())   # the node id is in the name: simulated nodes share /dev/shm

    ``stale_after_s``: a cache whose heartbeat is older is taken for dead. ``wait_s`` bounds a
    cache's long-poll at its upstream: how often an idle cache beats (well under ``stale_after_s``).
    """

    prefix: str
    size: int
    locate: Callable[[], str] = this_host
    stale_after_s: float = 1.0
    retry_s: float = 0.5  # how often a source that fell back looks for its cache again
    wait_s: float = 0.25  # the longest a cache waits at its upstream for a new version
    catch_up_s: float = 0.05  # how long a read that needs a newer version waits for the cache to get it

    def shm_name(self, node: str) -> str:
        return f"{self.prefix}-{node[:24]}"


def serve_node_cache(server: HasUpstream, spec: CacheSpec, service_id: int = 0,
                     endpoint: ServiceEndpoint | None = None) -> ParamCache:
    """The service a runtime hosts on each node: that node's cache of ``server``'s versions, pushed
    to it at ``endpoint`` (its own, as upstream reaches it). It pulls the newest version before it
    is up (a restarted cache, the version it missed), so its actors' first reads find it there."""
    cache = ParamCache(server.upstream(), spec.shm_name(spec.locate()), spec.size, spec.wait_s, endpoint)
    cache.refresh()
    return cache.start()


class CachedSource:
    """The :class:`~gorila.core.ParamSource` of an actor on a node with a cache (``server.source(k)``)::

        source = CachedSource(spec, fallback=server.client(k))
        w = source.pull(); source.version

    Reads the node's buffer; while there is no live cache it pulls from the server through
    ``fallback`` and looks for the cache again every ``retry_s``. Counts reads from each, and the
    staleness of each read: how many versions the cache had seen upstream beyond the one read.
    """

    def __init__(self, spec: CacheSpec, fallback: ServerReader, out: np.ndarray | None = None):
        self.spec, self.fallback = spec, fallback
        self._flat = out if out is not None else np.zeros(spec.size, np.float32)  # out: a vector to read into
        self._version = -1
        self._buffer: SeqlockBuffer | None = None
        self._next_try = 0.0
        self.cache_reads = self.server_reads = self.staleness_sum = 0

    @property
    def version(self) -> int:
        return self._version

    @property
    def transport(self) -> str:
        """``"cache"`` while reading the node's cache, else ``"server"``."""
        return "cache" if self._buffer is not None else "server"

    def params(self) -> np.ndarray:
        return self._flat if self._version >= 0 else self.pull()

    def pull(self, at_least: int = 0) -> np.ndarray:
        """The newest parameters the node's cache holds; from the server while there is no live
        cache, or when the cache holds no version ``at_least`` or later within ``catch_up_s``."""
        buffer = self._live_buffer()
        if buffer is not None:
            # The server has at_least, so the cache is about to: give it one pull's time first.
            deadline = time.monotonic() + self.spec.catch_up_s
            while buffer.version < at_least and time.monotonic() < deadline:
                time.sleep(_CATCH_UP_LOOK_S)
            version = buffer.read(self._flat)
            if version >= max(at_least, 0):  # -1: nothing written yet
                self._version = version
                self.cache_reads += 1
                self.staleness_sum += max(buffer.upstream_version - version, 0)
                return self._flat
        np.copyto(self._flat, self.fallback.pull())
        self._version = self.fallback.version
        self.server_reads += 1
        return self._flat

    def _live_buffer(self) -> SeqlockBuffer | None:
        if self._buffer is not None and self._buffer.age_s() > self.spec.stale_after_s:
            self._buffer.close()  # its cache died: a restarted one makes a new segment
            self._buffer, self._next_try = None, time.monotonic() + self.spec.retry_s
        if self._buffer is None and time.monotonic() >= self._next_try:
            try:
                self._buffer = SeqlockBuffer.attach(self.spec.shm_name(self.spec.locate()), self.spec.size)
            except (FileNotFoundError, ValueError):
                self._next_try = time.monotonic() + self.spec.retry_s
            else:
                if self._buffer.age_s() > self.spec.stale_after_s:  # left behind by a dead cache
                    self._buffer.close()
                    self._buffer, self._next_try = None, time.monotonic() + self.spec.retry_s
        return self._buffer

    def counters(self) -> dict[str, float]:
        reads = max(self.cache_reads, 1)
        return {"cache_reads": self.cache_reads, "server_reads": self.server_reads,
                "param_staleness_mean": self.staleness_sum / reads}

    def close(self) -> None:
        if self._buffer is not None:
            self._buffer.close()
            self._buffer = None
