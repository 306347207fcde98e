"""Parameter caches on a two-node Ray cluster simulated on loopback: one cache per node, each
node's actors read their own node's cache, which the shard sends each version (or which catches up
by a pull), and killing a node's cache sends its actors to the server without stopping them."""

import sys
from dataclasses import replace

import numpy as np
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SIZE = 1000


@pytest.fixture(scope="module", autouse=True)
def probe_by_value(two_nodes):
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the probe actor below


def _probe(worker_id, server):
    """An actor that only reads its ParamSource (built in its process; pickled by value)."""
    from gorila.runtime.placement import node_id

    class Probe:
        def __init__(self):
            self.source = server.source(worker_id)
            self.flat = None

        def step(self):
            self.flat = self.source.pull()
            return True

        def report(self):
            buffer = self.source._buffer
            return {"node": node_id(), "transport": self.source.transport, "version": self.source.version,
                    "shm": buffer.name if buffer is not None else None, "value": float(self.flat[0]),
                    **self.source.counters()}

    return Probe()


@pytest.mark.heavy
def test_each_node_reads_its_own_cache_and_falls_back_when_it_is_killed(two_nodes, wait_until):
    from multiprocessing import shared_memory

    from gorila.params import ServerSpec, UpdateRule
    from gorila.runtime.ray_runtime import RayRuntime

    runtime = RayRuntime(call_timeout_s=60.0, schedule_timeout_s=30.0)
    names = []
    try:
        runtime.plan(8)  # a node holds its cache, a probe and maybe the shard: 1 CPU each node
        shards = runtime.start_shards(ServerSpec(UpdateRule.asynchronous(), optimizer="sgd", lr=1.0),
                                      np.zeros(SIZE, np.float32))
        server, tiers = runtime.start_param_caches(shards.server)
        caches = tiers["param_cache"]
        server = replace(server, cache=replace(server.cache, stale_after_s=0.3))
        names = [server.cache.shm_name(node["NodeID"]) for node in two_nodes.nodes()]
        workers = runtime.start_workers(_probe, 2, server, name="probe", node_of=lambda k: k)
        runtime.wait_started()
        assert len(set(caches.node_ids)) == 2 and sorted(workers.node_ids) == sorted(caches.node_ids)

        learner = shards.server.client(0)
        learner.params()
        versions = 4
        for v in range(1, versions + 1):
            learner.push(np.ones(SIZE, np.float32))
            wait_until(lambda: caches.call("version") == [v, v], 30, f"both caches at version {v}")
            reports = workers.run_steps(3)
            assert [r["version"] for r in reports] == [v, v] and [r["value"] for r in reports] == [-v, -v]

        for report in reports:  # each actor read the cache named after its own node
            assert report["transport"] == "cache" and report["shm"] == server.cache.shm_name(report["node"])
            assert report["server_reads"] == 0 and report["cache_reads"] == 3 * versions
        # each cache took every version once, by the shard's push or, a push late, by a catch-up pull
        # (version 0 pulled), whatever the actors read
        assert [s["pushes"] + s["pulls"] for s in caches.call("stats")] == [versions + 1] * 2

        # Node B's cache dies for good: its actor goes on with the server, node A's with its cache.
        b = caches.node_ids.index(reports[1]["node"])
        two_nodes.kill(caches.handles[b].handle, no_restart=True)
        learner.push(np.ones(SIZE, np.float32))
        wait_until(lambda: workers.run_steps(1)[1]["transport"] == "server", 30, "node B's actor fell back")
        after = workers.reports()
        assert after[1]["version"] == versions + 1 and after[1]["value"] == -(versions + 1)
        assert after[1]["server_reads"] >= 1
        assert after[0]["transport"] == "cache" and after[0]["server_reads"] == 0
    finally:
        runtime.shutdown()  # closes the live cache, which unlinks its segment
        for name in names:
            try:  # a killed cache cannot unlink its segment: the test does
                shared_memory.SharedMemory(name).unlink()
            except FileNotFoundError:
                pass
