"""Least squares on the local runtime against plain full-batch gradient descent."""

import numpy as np
import pytest

from gorila.algos.lstsq import data
from gorila.algos.lstsq.config import LstsqConfig
from gorila.algos.lstsq.run import train
from gorila.config import RunConfig

CFG = LstsqConfig(n=3000, d=8, noise=0.1, condition=10.0, iterations=50, tol=1e-12, log_every=1)


def reference_gd(cfg, seed, iterations):
    """Single-process full-batch gradient descent on the same rows, in float64."""
    x, y = data.rows(seed, cfg.n, cfg.d, cfg.noise, cfg.condition, range(data.num_chunks(cfg.n)))
    x, y = x.astype(np.float64), y.astype(np.float64)
    w = np.zeros(cfg.d)
    out = []
    for _ in range(iterations):
        w = w - cfg.step_size * x.T @ (x @ w - y) / cfg.n
        out.append(w.copy())
    return out


def test_sync_four_workers_equals_full_batch_gradient_descent(tmp_path):
    seen = {}
    run = RunConfig(algo="lstsq", mode="sync", workers=4, shards=2, runtime="local", run_dir=tmp_path)
    summary = train(run, CFG, on_round=lambda v, w: seen.__setitem__(v, w.copy()))
    expected = reference_gd(CFG, run.seed, 50)
    assert sorted(seen) == list(range(1, 51))
    for t in range(1, 51):
        np.testing.assert_allclose(seen[t], expected[t - 1], rtol=1e-5, atol=1e-7, err_msg=f"iteration {t}")
    assert summary["updates"] == 50
    assert summary["pushes_counted"] == 200 and summary["pushes_rejected"] == 0
    # Every round moves m*d floats each way through the server.
    assert summary["bytes_pushed"] == 50 * 4 * CFG.d * 4


def test_partition_covers_every_row_once():
    parts = data.partition(10 * data.CHUNK_ROWS + 7, 4)
    chunks = [c for p in parts for c in p]
    assert chunks == list(range(11))


@pytest.mark.parametrize("mode", ["async", "semi-async"])
def test_async_modes_converge(tmp_path, mode):
    cfg = LstsqConfig(n=3000, d=8, iterations=400, tol=1e-2, log_every=20)
    run = RunConfig(algo="lstsq", mode=mode, workers=3, runtime="local", run_dir=tmp_path)
    summary = train(run, cfg)
    assert summary["reached_target"]
    gap0 = summary["initial_loss"] - summary["optimal_loss"]
    assert summary["final_loss"] - summary["optimal_loss"] <= 1e-2 * gap0
