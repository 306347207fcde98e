"""Shards spread over a two-node Ray cluster simulated on loopback."""


import pytest

from gorila.agents.lstsq.config import LstsqConfig
from gorila.config import RunConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


@pytest.mark.heavy
def test_shards_on_both_nodes_and_training_converges(two_nodes, tmp_path, train):
    import numpy as np

    from gorila.params import ServerSpec, UpdateRule
    from gorila.runtime.ray_runtime import RayRuntime

    runtime = RayRuntime()
    runtime.plan(4)
    shards = runtime.start_shards(ServerSpec(UpdateRule.asynchronous(), num_shards=2), np.zeros(10, np.float32))
    assert len(set(shards.node_ids)) == 2, shards.node_ids
    runtime.shutdown()  # frees the CPUs its shards hold
    s = train(RunConfig(algo="lstsq", mode="sync", shards=2, runtime="ray", run_dir=tmp_path),
              LstsqConfig(workers=2, n=4000, d=10, iterations=200, tol=1e-3))
    assert s["reached_target"]



def test_the_cluster_head_passes_the_check_that_refuses_non_ray_addresses(two_nodes):
    from gorila.runtime.ray_runtime import check_reachable

    # A GCS answers the HTTP/2 preface with its settings; a silent listener does not (tests/smoke/test_terminal.py).
    check_reachable(two_nodes.get_runtime_context().gcs_address, "--address", timeout_s=10.0)


def test_a_gpu_asked_of_a_cluster_without_one_fails_after_the_scheduling_timeout_naming_the_flag(two_nodes,
                                                                                               gpu_refusal):
    from gorila.replay.shard import ReplayShard  # any service factory: it is never built

    assert "the cluster has no GPU" in str(gpu_refusal(ReplayShard, 0.5))
