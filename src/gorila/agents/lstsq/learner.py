"""One map-reduce worker: its rows (a :class:`~gorila.mapreduce.DataShard`), its local gradient
(the map and the local ``sum``), its pushes (the server's ``mean``, under the synchronous rule)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from gorila.envs.least_squares import LeastSquares
from gorila.learners.straggler import Straggler
from gorila.mapreduce import DataShard, Partial
from gorila.params import ParameterServer


def residual_gradients(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> Partial:
    """The map of least squares, ``z_i = (x_i.w - y_i) x_i`` for every row, combined in the mapper:
    their sum is one matrix product, ``X^T (Xw - y)``, never a list of n vectors."""
    return Partial(x.T @ (x @ w - y), len(y))


def local_gradient(x: np.ndarray, y: np.ndarray, w: np.ndarray, scale: np.float32) -> np.ndarray:
    """Map and local reduce over one worker's rows: ``scale * sum_i (x_i.w - y_i) x_i``."""
    return DataShard(x, y).map_reduce(residual_gradients, "sum", w) * scale


class LstsqWorker:
    """Map (``g = (x.w - y) x`` over local rows) and local reduce (their sum), pushed to the server.

    The local sum is scaled by ``m / n`` (m workers, n rows): the mean of all m workers'
    gradients, which the synchronous rule applies, is then exactly the full-batch gradient
    of ``(1/2n) ||Xw - y||^2``; alone (asynchronous rule) it is an estimate of it.
    Built inside the worker's process, so the rows never travel::

        factory = functools.partial(LstsqWorker, problem=LeastSquares(...), num_workers=4)
        worker = factory(worker_id, server); worker.step()

    ``straggler > 1`` makes worker 0's gradients take that many times as long (see
    :mod:`gorila.learners.straggler`).
    """

    def __init__(self, worker_id: int, server: ParameterServer, *, problem: LeastSquares, num_workers: int,
                 straggler: float = 1.0):
        self.data = DataShard(*problem.rows(problem.partition(num_workers)[worker_id]))
        self.scale = np.float32(num_workers / problem.n)
        self.client = server.client(worker_id)
        self.client.connect()  # the transport set up now, so the first step is a round like any other
        self.slow = Straggler.for_worker(worker_id, straggler)
        self.steps = 0

    def gradient(self, w: np.ndarray) -> np.ndarray:
        return self.data.map_reduce(residual_gradients, "sum", w) * self.scale

    def step(self) -> None:
        started = time.perf_counter()
        w = self.client.params()
        grad = self.gradient(w)
        self.slow.stretch(started)
        self.client.push(grad)  # waits for the reply under any rule: the textbook's worker
        self.steps += 1

    def report(self) -> dict[str, Any]:
        return {"steps": self.steps, **{f"pushes_{k}": v for k, v in self.client.outcomes.items()},
                **self.client.counters()}
