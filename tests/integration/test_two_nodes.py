"""Shards spread over a two-node Ray cluster simulated on loopback."""


import pytest

from gorila.algos.lstsq.config import LstsqConfig
from gorila.config import RunConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def test_shards_on_both_nodes_and_training_converges(two_nodes, tmp_path, train):
    from gorila.params import ServerSpec, UpdateRule
    from gorila.runtime.ray_runtime import RayRuntime
    import numpy as np

    runtime = RayRuntime()
    runtime.plan(4)
    shards = runtime.start_shards(ServerSpec(UpdateRule.asynchronous(), num_shards=2), np.zeros(10, np.float32))
    assert len(set(shards.node_ids)) == 2, shards.node_ids
    runtime.shutdown()  # frees the CPUs its shards hold
    s = train(RunConfig(algo="lstsq", mode="sync", shards=2, runtime="ray", run_dir=tmp_path),
              LstsqConfig(workers=2, n=4000, d=10, iterations=200, tol=1e-3))
    assert s["reached_target"]

