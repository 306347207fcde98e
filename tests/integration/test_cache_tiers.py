"""Parameter caches in two tiers on a three-node Ray cluster simulated on loopback: with
``--cache-tiers node,rack`` and two nodes per rack (two racks), the shard sends each version to the
two rack caches and each rack cache sends it on to its nodes' caches, unasked: no cache reads the
server, or its rack, for a version after the first. The node tier alone is sent it by the shard."""


import numpy as np
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.heavy, pytest.mark.timeout(240)]

SIZE = 1000
VERSIONS = 3
# A cache looks at its upstream this often: within a test's waits every version after the first
# must come by a push.
PROBE_S = 60.0


def _run(tiers, wait_until):
    """The server's reads (its shard's pulls) while the learner makes VERSIONS versions and every
    node's cache takes each; and the tiers' groups' counters."""
    from gorila.params import ServerSpec, UpdateRule
    from gorila.runtime.ray_runtime import RayRuntime

    runtime = RayRuntime(call_timeout_s=60.0, schedule_timeout_s=120.0)
    try:
        runtime.plan(8)  # a small share for the shard: each node must hold its caches beside it
        shards = runtime.start_shards(ServerSpec(UpdateRule.asynchronous(), optimizer="sgd", lr=1.0),
                                      np.zeros(SIZE, np.float32))
        server, caches = runtime.start_param_caches(shards.server, tiers, wait_s=PROBE_S)
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
        reads = sum(s.pulls for s in shards.stats()) - before
        return reads, {name: group.call("stats") for name, group in caches.items()}
    finally:
        runtime.shutdown()


def test_each_version_is_sent_once_per_rack_and_each_rack_sends_it_to_its_nodes(three_nodes, wait_until):
    from gorila.params.tiers import CacheTiers

    tiers = CacheTiers.parse("node,rack", nodes_per_rack=2)
    assert tiers.racks(3) == 2
    reads, stats = _run(tiers, wait_until)
    assert reads == 0  # nothing asked of the server for versions 1 to 3
    for tier in ("rack_cache", "param_cache"):
        assert [(s["pulls"], s["pushes"]) for s in stats[tier]] == [(1, VERSIONS)] * len(stats[tier])
    # the rack of nodes 0 and 1 sent both their caches each version, the rack of node 2 its one
    assert sorted(s["sent"] for s in stats["rack_cache"]) == [VERSIONS, 2 * VERSIONS]
    assert sorted(s["served"] for s in stats["rack_cache"]) == [1, 2]  # the node caches' first pulls


def test_without_the_rack_tier_every_node_cache_is_sent_each_version_by_the_server(three_nodes, wait_until):
    from gorila.params.tiers import CacheTiers

    reads, stats = _run(CacheTiers(), wait_until)
    assert reads == 0 and set(stats) == {"param_cache"}
    assert [(s["pulls"], s["pushes"]) for s in stats["param_cache"]] == [(1, VERSIONS)] * 3
