"""The node cache (Menger): a seqlock buffer never shows a half-written vector; a polling cache
(the local runtime's, and bench menger's comparison) pulls once per version, is told of a new
version by its upstream (a long-poll, not a timed probe), and caches chain; actors fall back to
the server while their cache is gone. Pushed caches: test_param_cache_push.py."""

import multiprocessing
import threading
import time
import uuid

import numpy as np
import pytest

from gorila.params import LocalEndpoint, ParameterServer, ParameterShard, ServerSpec, UpdateRule
from gorila.params.cache import CachedSource, CacheSpec, ParamCache
from gorila.params.seqlock import SeqlockBuffer


def _writer(name: str, size: int, ready, stop) -> None:
    """Writes versions 1, 2, ... (each a vector of its number) until ``stop`` is set."""
    buf = SeqlockBuffer.attach(name, size)
    ready.set()
    flat = np.empty(size, np.float32)
    v = 0
    while not stop.is_set():
        v += 1
        flat.fill(v)
        buf.write(flat, v)


def test_a_reader_never_sees_a_torn_vector():
    """A writer process fills the vector with its version number, again and again; every read
    must be all one value and equal to the version read with it. Reading goes on until 50
    different versions were read (however busy the machine, the reads overlap the writes)."""
    size = 500_000
    owner = SeqlockBuffer.create(f"gorila-test-{uuid.uuid4().hex[:8]}", size)
    ctx = multiprocessing.get_context("fork")
    ready, stop = ctx.Event(), ctx.Event()
    writer = ctx.Process(target=_writer, args=(owner.name, size, ready, stop))
    writer.start()
    try:
        assert ready.wait(timeout=30)
        out = np.empty(size, np.float32)
        seen: set[int] = set()
        deadline = time.monotonic() + 60
        while len(seen) < 50:
            version = owner.read(out)
            if version > 0:
                assert out.min() == out.max() == version
                seen.add(version)
            assert time.monotonic() < deadline, f"read {len(seen)} versions in 60 s"
    finally:
        stop.set()
        writer.join(timeout=30)
        owner.close()
    assert writer.exitcode == 0


class CountingUpstream:
    """A fake server: a version set by the test (``publish``); counts probes and pulls. Its
    ``wait_version`` blocks until the version asked for exists or ``wait_s`` has passed, as a Ray
    shard's does."""

    def __init__(self, size: int):
        self.size, self.current, self.probes, self.pulls = size, 0, 0, 0
        self.changed = threading.Condition()

    def publish(self, version: int) -> None:
        with self.changed:
            self.current = version
            self.changed.notify_all()

    def wait_version(self, at_least: int, wait_s: float) -> int:
        self.probes += 1
        with self.changed:
            self.changed.wait_for(lambda: self.current >= at_least, timeout=wait_s)
            return self.current

    def pull(self) -> tuple[np.ndarray, int]:
        self.pulls += 1
        return np.full(self.size, self.current, np.float32), self.current

    def subscribe(self, name: str, endpoint, held: int) -> int:
        raise AssertionError("a polling cache never subscribes")

    def slices(self, size: int) -> tuple[slice, ...]:
        return (slice(0, size),)


def test_the_cache_pulls_once_per_version_and_chains():
    upstream = CountingUpstream(10)
    node_a = ParamCache(upstream, f"gorila-test-{uuid.uuid4().hex[:8]}-a", 10)
    node_b = ParamCache(node_a, f"gorila-test-{uuid.uuid4().hex[:8]}-b", 10)  # pulls from node a's cache
    try:
        for version in range(3):
            upstream.publish(version)
            for _ in range(4):
                node_a.refresh()
                node_b.refresh()
        assert upstream.pulls == 3 and upstream.probes == 12
        assert node_a.counts.pulls == node_a.counts.versions == 3
        assert node_a.counts.served == 3  # node b read each version from node a, once
        assert node_b.counts.pulls == 3 and node_b.counts.bytes_pulled == 3 * 10 * 4
        flat, version = node_b.pull()
        assert version == 2 and (flat == 2).all()
    finally:
        node_b.close()
        node_a.close()


@pytest.mark.heavy
def test_a_started_cache_is_told_of_each_new_version_by_its_upstream_without_polling():
    """The cache waits at its upstream up to 60 s a time: a timed probe would not see version 1
    within the test's 30 s, and a cache that asked again and again would have probed many times."""
    upstream = CountingUpstream(8)
    cache = ParamCache(upstream, f"gorila-test-{uuid.uuid4().hex[:8]}", 8, wait_s=60.0)
    rack_side = ParamCache(cache, f"gorila-test-{uuid.uuid4().hex[:8]}-node", 8, wait_s=60.0)  # chained
    try:
        cache.refresh()
        rack_side.refresh()
        cache.start()
        rack_side.start()
        for version in (1, 2, 3):
            upstream.publish(version)
            assert rack_side.wait_version(version, wait_s=30.0) == version
        assert upstream.pulls == 4 and cache.counts.served == 4  # version 0, then one pull per version
        assert upstream.probes <= 5  # the first refresh, one wait per version, the wait now under way
        flat, version = rack_side.pull()
        assert version == 3 and (flat == 3).all()
    finally:
        rack_side.close()
        cache.close()


def test_a_wait_at_a_cache_ends_after_its_bound_without_a_new_version():
    upstream = CountingUpstream(4)
    cache = ParamCache(upstream, f"gorila-test-{uuid.uuid4().hex[:8]}", 4)
    try:
        cache.refresh()
        assert cache.wait_version(1, wait_s=0.05) == 0  # nothing new: the version held, after the bound
        assert not cache.refresh(wait_s=0.05) and upstream.pulls == 1
    finally:
        cache.close()


class StuckUpstream(CountingUpstream):
    """A fake server whose pulls, once ``hold`` is set, block until the test releases them."""

    def __init__(self, size: int):
        super().__init__(size)
        self.hold, self.pulling, self.release = threading.Event(), threading.Event(), threading.Event()

    def pull(self) -> tuple[np.ndarray, int]:
        if self.hold.is_set():
            self.pulling.set()
            assert self.release.wait(timeout=60)
        return super().pull()


def test_a_cache_stuck_in_a_slow_pull_still_beats_so_its_readers_stay():
    """A 16 MB pull from a busy server can outlast a reader's ``stale_after_s``: the cache's
    heartbeat must not wait for it, or every reader of the node would turn to the server."""
    upstream = StuckUpstream(4)
    cache = ParamCache(upstream, f"gorila-test-{uuid.uuid4().hex[:8]}", 4, wait_s=0.02)
    try:
        cache.refresh()
        cache.start()
        upstream.hold.set()
        upstream.publish(1)
        assert upstream.pulling.wait(timeout=30)  # the cache's thread is inside the pull now
        stuck_at = time.monotonic()
        deadline = stuck_at + 30
        # a beat after the pull got stuck: younger than the time since then
        while cache.buffer.age_s() >= time.monotonic() - stuck_at:
            assert time.monotonic() < deadline, "no heartbeat while the pull was stuck"
        assert cache.version() == 0  # still serving the version it holds
        upstream.release.set()
        assert cache.wait_version(1, wait_s=30) == 1
    finally:
        upstream.release.set()
        cache.close()


def _server(size: int) -> tuple[ParameterServer, list[ParameterShard]]:
    spec = ServerSpec(UpdateRule.asynchronous(), num_shards=2, optimizer="sgd", lr=1.0)
    shards = spec.build(np.zeros(size, np.float32))
    return ParameterServer(tuple(LocalEndpoint(s) for s in shards), spec.layout(size), spec.rule), shards


def test_actors_read_the_cache_and_fall_back_to_the_server_while_it_is_gone():
    size = 6
    server, shards = _server(size)
    spec = CacheSpec(prefix=f"gorila-test-{uuid.uuid4().hex[:8]}", size=size, locate=lambda: "node0",
                     retry_s=0.0)
    learner = server.client(0)
    learner.params()
    cache = ParamCache(server.upstream(), spec.shm_name("node0"), size)
    source = CachedSource(spec, server.client(1))
    learner.push(np.ones(size, np.float32))  # version 1: params -1
    cache.refresh()
    pulled = cache.counts.pulls
    assert (source.pull() == -1).all() and source.version == 1
    assert source.transport == "cache" and source.cache_reads == 1 and source.server_reads == 0
    assert cache.counts.pulls == pulled  # the actor's read did not reach the server

    cache.close()  # the cache dies
    learner.params()
    learner.push(np.ones(size, np.float32))  # version 2
    assert (source.pull() == -2).all() and source.version == 2
    assert source.transport == "server" and source.server_reads == 1

    restarted = ParamCache(server.upstream(), spec.shm_name("node0"), size)
    try:
        restarted.refresh()
        source.pull()
        assert source.transport == "cache" and source.cache_reads == 2 and source.version == 2
    finally:
        source.close()
        restarted.close()
    assert all(s.version == 2 for s in shards)


def test_a_read_that_needs_a_version_the_cache_has_not_got_yet_goes_to_the_server():
    """Synchronous PPO's actors act each round on the version the round waited for."""
    size = 4
    server, _ = _server(size)
    prefix = f"gorila-test-{uuid.uuid4().hex[:8]}"
    cache = ParamCache(server.upstream(), f"{prefix}-node0", size)
    source = CachedSource(CacheSpec(prefix, size, locate=lambda: "node0"), server.client(1))
    learner = server.client(0)
    learner.params()
    try:
        cache.refresh()
        learner.push(np.ones(size, np.float32))  # version 1, which the cache has not got
        assert (source.pull(at_least=0) == 0).all() and source.version == 0 and source.cache_reads == 1
        assert (source.pull(at_least=1) == -1).all() and source.version == 1 and source.server_reads == 1
        cache.refresh()
        source.pull(at_least=1)
        assert source.version == 1 and source.cache_reads == 2 and source.server_reads == 1
    finally:
        source.close()
        cache.close()


def test_a_cache_whose_heartbeat_is_older_than_the_limit_is_left_for_the_server():
    size = 4
    server, _ = _server(size)
    prefix = f"gorila-test-{uuid.uuid4().hex[:8]}"
    cache = ParamCache(server.upstream(), f"{prefix}-node0", size)
    try:
        cache.refresh()
        live = CachedSource(CacheSpec(prefix, size, locate=lambda: "node0", stale_after_s=60.0), server.client(1))
        live.pull()
        assert live.transport == "cache"
        # Any heartbeat is older than 0 s: this source takes the cache for dead.
        dead = CachedSource(CacheSpec(prefix, size, locate=lambda: "node0", stale_after_s=0.0), server.client(2))
        dead.pull()
        assert dead.transport == "server" and dead.server_reads == 1 and dead.cache_reads == 0
        live.close()
    finally:
        cache.close()


def test_the_server_gives_a_client_without_a_cache():
    server, _ = _server(4)
    assert type(server.source(3)).__name__ == "ParameterClient"


def test_a_buffer_that_is_too_small_is_refused():
    owner = SeqlockBuffer.create(f"gorila-test-{uuid.uuid4().hex[:8]}", 4)
    try:
        with pytest.raises(ValueError, match="fewer than"):
            SeqlockBuffer.attach(owner.name, 1 << 20)
    finally:
        owner.close()
