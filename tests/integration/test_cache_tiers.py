"""Parameter caches in two tiers on a three-node Ray cluster simulated on loopback: with
``--cache-tiers node,rack`` and two nodes per rack (two racks), each node's cache reads its rack's
cache and only the rack caches read the server, so the server is read twice per version, not
three times (once per node, as the node tier alone reads it)."""


import numpy as np
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.heavy, pytest.mark.timeout(240)]

SIZE = 1000
VERSIONS = 3


def _server_reads(tiers, wait_until):
    """The server's reads (its shard's pulls) per version while the learner makes VERSIONS versions
    and every node's cache takes each; and the tiers' groups' counters."""
    from gorila.params import ServerSpec, UpdateRule
    from gorila.runtime.ray_runtime import RayRuntime

    runtime = RayRuntime(call_timeout_s=60.0, schedule_timeout_s=120.0)
    try:
        runtime.plan(8)  # a small share for the shard: each node must hold its caches beside it
        shards = runtime.start_shards(ServerSpec(UpdateRule.asynchronous(), optimizer="sgd", lr=1.0),
                                      np.zeros(SIZE, np.float32))
        server, caches = runtime.start_param_caches(shards.server, tiers)
        runtime.wait_started()
        node_caches = caches["param_cache"]
        assert len(set(node_caches.node_ids)) == 3  # one on every node
        learner = shards.server.client(0)
        learner.params()
        wait_until(lambda: node_caches.call("version") == [0] * 3, 60, "every node cache at version 0")
        before = sum(s.pulls for s in shards.stats())
        for v in range(1, VERSIONS + 1):
            learner.push(np.ones(SIZE, np.float32))
            wait_until(lambda: node_caches.call("version") == [v] * 3, 60, f"every node cache at version {v}")
        reads = (sum(s.pulls for s in shards.stats()) - before) / VERSIONS
        return reads, {name: group.call("stats") for name, group in caches.items()}
    finally:
        runtime.shutdown()


def test_the_server_is_read_once_per_version_per_rack(three_nodes, wait_until):
    from gorila.params.tiers import CacheTiers

    tiers = CacheTiers.parse("node,rack", nodes_per_rack=2)
    assert tiers.racks(3) == 2
    reads, stats = _server_reads(tiers, wait_until)
    assert reads == 2  # the node tier alone reads it 3 times (the test below)
    assert [s["pulls"] for s in stats["rack_cache"]] == [VERSIONS + 1] * 2  # version 0 included
    # the rack of nodes 0 and 1 served both their caches, the rack of node 2 its one
    assert sorted(s["served"] for s in stats["rack_cache"]) == [VERSIONS + 1, 2 * (VERSIONS + 1)]
    assert [s["pulls"] for s in stats["param_cache"]] == [VERSIONS + 1] * 3


def test_without_the_rack_tier_every_node_reads_the_server(three_nodes, wait_until):
    from gorila.params.tiers import CacheTiers

    reads, stats = _server_reads(CacheTiers(), wait_until)
    assert reads == 3 and set(stats) == {"param_cache"}
