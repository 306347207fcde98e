"""Least squares on the local runtime against plain full-batch gradient descent."""

import numpy as np
import pytest

from gorila.agents.lstsq.builder import make_plan
from gorila.agents.lstsq.config import LstsqConfig
from gorila.config import RunConfig
from gorila.driver.loop import run
from gorila.envs.least_squares import CHUNK_ROWS, LeastSquares

CFG = LstsqConfig(workers=4, n=3000, d=8, noise=0.1, condition=10.0, iterations=50, tol=1e-12, log_every=1)


def train(run_config, cfg, on_chunk=None):
    return run(run_config, make_plan(run_config, cfg), on_chunk)


def reference_gd(cfg, seed, iterations):
    """Single-process full-batch gradient descent on the same rows, in float64."""
    problem = LeastSquares(cfg.n, cfg.d, cfg.noise, cfg.condition, seed)
    x, y = problem.rows(range(problem.num_chunks))
    x, y = x.astype(np.float64), y.astype(np.float64)
    w = np.zeros(cfg.d)
    out = []
    for _ in range(iterations):
        w = w - cfg.step_size * x.T @ (x @ w - y) / cfg.n
        out.append(w.copy())
    return out


def test_sync_four_workers_equals_full_batch_gradient_descent(tmp_path):
    seen = {}

    def record(placed):
        w, versions = placed.shards.pull()
        seen[min(versions)] = w

    run_config = RunConfig(algo="lstsq", mode="sync", shards=2, runtime="local", run_dir=tmp_path)
    summary = train(run_config, CFG, record)
    expected = reference_gd(CFG, run_config.seed, 50)
    assert sorted(seen) == list(range(1, 51))
    for t in range(1, 51):
        np.testing.assert_allclose(seen[t], expected[t - 1], rtol=1e-5, atol=1e-7, err_msg=f"iteration {t}")
    assert summary["updates"] == 50
    assert summary["pushes_counted"] == 200 and summary["pushes_rejected"] == 0
    # Every round moves m*d floats each way through the server.
    assert summary["bytes_pushed"] == 50 * 4 * CFG.d * 4


def test_partition_covers_every_row_once():
    parts = LeastSquares(10 * CHUNK_ROWS + 7, 4, 0.1, 10.0).partition(4)
    chunks = [c for p in parts for c in p]
    assert chunks == list(range(11))


@pytest.mark.parametrize("mode", ["async", "semi-async"])
def test_async_modes_converge(tmp_path, mode):
    cfg = LstsqConfig(workers=3, n=3000, d=8, iterations=400, tol=1e-2, log_every=20)
    summary = train(RunConfig(algo="lstsq", mode=mode, runtime="local", run_dir=tmp_path), cfg)
    assert summary["reached_target"]
    gap0 = summary["initial_loss"] - summary["optimal_loss"]
    assert summary["final_loss"] - summary["optimal_loss"] <= 1e-2 * gap0
