"""One map-reduce worker: its rows, its local gradient, its pushes."""

from __future__ import annotations

from typing import Any

import numpy as np

from gorila.algos.lstsq import data
from gorila.algos.lstsq.config import LstsqConfig
from gorila.params import ParameterClient, ShardEndpoint, ShardLayout


def local_gradient(x: np.ndarray, y: np.ndarray, w: np.ndarray, scale: np.float32) -> np.ndarray:
    """Map and local reduce over one worker's rows: ``scale * sum_i (x_i.w - y_i) x_i``."""
    return (x.T @ (x @ w - y)) * scale


class LstsqWorker:
    """Map (``g = (x.w - y) x`` over local rows) and local reduce (their sum), pushed to the server.

    The local sum is scaled by ``m / n`` (m workers, n rows): the mean of all m workers'
    gradients, which the synchronous rule applies, is then exactly the full-batch gradient
    of ``(1/2n) ||Xw - y||^2``; alone (asynchronous rule) it is an estimate of it.
    Built by :func:`factory` inside the worker's process, so the rows never travel.
    """

    def __init__(self, worker_id: int, endpoints: list[ShardEndpoint], *, cfg: LstsqConfig, seed: int,
                 num_workers: int, barrier: bool, timeout_s: float):
        chunks = data.partition(cfg.n, num_workers)[worker_id]
        self.x, self.y = data.rows(seed, cfg.n, cfg.d, cfg.noise, cfg.condition, chunks)
        self.scale = np.float32(num_workers / cfg.n)
        self.client = ParameterClient(endpoints, ShardLayout(cfg.d, len(endpoints)), worker_id=worker_id,
                                      barrier=barrier, timeout_s=timeout_s)
        self.steps = 0

    def gradient(self, w: np.ndarray) -> np.ndarray:
        return local_gradient(self.x, self.y, w, self.scale)

    def step(self) -> None:
        w = self.client.params()
        self.client.push(self.gradient(w))
        self.steps += 1

    def moments(self) -> data.Moments:
        x = self.x.astype(np.float64)
        return data.Moments(x.T @ x, x.T @ self.y.astype(np.float64),
                            float(self.y.astype(np.float64) @ self.y), len(self.y))

    def report(self) -> dict[str, Any]:
        return {"steps": self.steps, **{f"pushes_{k}": v for k, v in self.client.outcomes.items()}}
