"""Pushed node caches (Menger: "the learner only sends the updated model to the caches"): once a
cache has subscribed, the shards send it each new version with no request from it, through
chained tiers; a cache that missed a push, restarted or not, catches up by a pull, counted apart."""

import uuid

import numpy as np
import pytest

from gorila.params import LocalEndpoint, ParameterServer, ServerSpec, UpdateRule
from gorila.params.cache import ParamCache
from gorila.reply import Done

SIZE = 7


class Named:
    """An in-process endpoint by name: a copy held by a sender reaches whichever object now answers to
    the name (as a Ray endpoint reaches the process Ray restarted), and none while it is down."""

    def __init__(self):
        self.target = None

    def call(self, method, *args):
        if self.target is None:
            raise ConnectionError("the cache is down")
        return Done(getattr(self.target, method)(*args))


class CountingServer:
    """The server as a cache's upstream, counting every request the cache makes of it."""

    def __init__(self, upstream):
        self.upstream, self.requests = upstream, []

    def __getattr__(self, method):
        def call(*args):
            self.requests.append(method)
            return getattr(self.upstream, method)(*args)
        return call

    def slices(self, size):
        return self.upstream.slices(size)


@pytest.fixture
def server():
    spec = ServerSpec(UpdateRule.asynchronous(), num_shards=2, optimizer="sgd", lr=1.0)
    endpoints = tuple(LocalEndpoint(s) for s in spec.build(np.zeros(SIZE, np.float32)))
    yield ParameterServer(endpoints, spec.layout(SIZE), spec.rule)
    for endpoint in endpoints:
        if endpoint.broadcast is not None:
            endpoint.broadcast.close()


def _cache(upstream, endpoint, name=None, wait_s=0.25):
    cache = ParamCache(upstream, name or f"gorila-test-{uuid.uuid4().hex[:8]}", SIZE, wait_s=wait_s, endpoint=endpoint)
    endpoint.target = cache
    return cache


def _publish(learner, versions):
    for _ in range(versions):
        learner.params()
        learner.push(np.ones(SIZE, np.float32))


def test_a_publication_reaches_every_cache_with_no_request_from_the_cache(server):
    """Two node caches of the server, and a third chained below one of them (a rack's tier)."""
    upstream = CountingServer(server.upstream())
    a, b = _cache(upstream, Named()), _cache(upstream, Named())
    below = _cache(a, Named())
    caches = (a, b, below)
    try:
        for cache in caches:
            cache.refresh()  # version 0, pulled as a started cache does
            assert not cache.probe()  # subscribed: nothing to catch up
        asked = list(upstream.requests)
        learner = server.client(0)
        _publish(learner, 3)
        for cache in caches:
            assert cache.wait_version(3, wait_s=30.0) == 3
            flat, version = cache.pull()
            np.testing.assert_array_equal(flat, np.full(SIZE, -3.0, np.float32))
        assert upstream.requests == asked  # nothing asked since the subscriptions
        assert [c.counts.pulls for c in caches] == [1, 1, 1] and all(c.counts.pushes >= 1 for c in caches)
        assert a.counts.served == 2  # the cache below's first pull and the test's read: the versions were sent
    finally:
        for cache in reversed(caches):
            cache.close()


def test_a_cache_that_missed_a_push_catches_up_by_a_pull_counted_apart(server):
    endpoint = Named()
    cache = _cache(server.upstream(), endpoint, wait_s=0.05)
    learner = server.client(0)
    try:
        cache.refresh()
        cache.probe()
        _publish(learner, 1)
        assert cache.wait_version(1, wait_s=30.0) == 1 and cache.counts.pushes == 1
        endpoint.target = None  # a slow or unreachable cache: the sends of version 2 fail
        _publish(learner, 1)
        assert cache.probe()  # version 2 not here within the probe's wait: pulled
        assert cache.version() == 2 and cache.counts.pulls == 2 and cache.counts.pushes == 1
        endpoint.target = cache
        _publish(learner, 1)
        assert cache.wait_version(3, wait_s=30.0) == 3 and cache.counts.pushes == 2  # sent again
    finally:
        cache.close()


def test_a_restarted_cache_recovers_the_newest_version_and_is_sent_the_next(server):
    endpoint = Named()
    name = f"gorila-test-{uuid.uuid4().hex[:8]}"
    cache = _cache(server.upstream(), endpoint, name)
    learner = server.client(0)
    cache.refresh()
    cache.probe()
    _publish(learner, 1)
    assert cache.wait_version(1, wait_s=30.0) == 1
    cache.close()  # the cache dies
    endpoint.target = None
    _publish(learner, 2)  # versions 2 and 3 find it down
    restarted = _cache(server.upstream(), endpoint, name)  # under the same name, as Ray restarts it
    try:
        restarted.refresh()
        flat, version = restarted.pull()
        assert version == 3 and (flat == -3.0).all() and restarted.counts.pulls == 1
        restarted.probe()
        _publish(learner, 1)
        assert restarted.wait_version(4, wait_s=30.0) == 4
        assert restarted.counts.pushes == 1 and restarted.counts.pulls == 1
    finally:
        restarted.close()
