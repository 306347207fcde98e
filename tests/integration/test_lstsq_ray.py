"""Least squares on real Ray with two workers, under each update rule."""

import numpy as np
import pytest

from gorila.algos.lstsq.config import LstsqConfig
from gorila.algos.lstsq.run import train
from gorila.config import RunConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CFG = LstsqConfig(n=4000, d=10, iterations=300, tol=1e-3, log_every=5)


def test_sync_on_ray_is_gradient_descent(ray_local, tmp_path):
    local, remote = {}, {}
    exact = LstsqConfig(n=4000, d=10, iterations=12, tol=1e-12, log_every=1)
    train(RunConfig(algo="lstsq", mode="sync", workers=2, runtime="local", run_dir=tmp_path / "a"), exact,
          on_round=lambda v, w: local.__setitem__(v, w.copy()))
    s = train(RunConfig(algo="lstsq", mode="sync", workers=2, shards=2, runtime="ray", run_dir=tmp_path / "b"),
              exact, on_round=lambda v, w: remote.__setitem__(v, w.copy()))
    assert sorted(remote) == sorted(local) == list(range(1, 13))
    for v in local:
        np.testing.assert_allclose(remote[v], local[v], rtol=1e-6)
    assert s["pushes_counted"] == 2 * 12 and s["pushes_accepted"] == s["pushes_rejected"] == 0
    assert s["cpu_time_s"] > 0


@pytest.mark.parametrize("mode", ["sync", "async", "semi-async"])
def test_each_mode_reaches_the_target(ray_local, tmp_path, mode):
    s = train(RunConfig(algo="lstsq", mode=mode, workers=2, runtime="ray", run_dir=tmp_path), CFG)
    assert s["reached_target"], s
    pushes = s["pushes_counted"] + s["pushes_accepted"]
    if mode == "sync":
        assert pushes == 2 * s["updates"]
    elif mode == "async":
        assert s["pushes_counted"] == s["updates"]
    else:
        assert s["pushes_counted"] == 20 * s["updates"]
    assert s["bytes_pushed"] == (pushes + s["pushes_rejected"]) * CFG.d * 4
