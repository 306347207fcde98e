"""A learner fed by a trajectory queue: what IMPALA's and PPO's learners share (the queue's
requests, the batch held, the policy lag and the report); each algorithm says how it learns from
a batch."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
from torch import nn

from gorila.errors import WorkerTimeoutError
from gorila.learners.replay_learner import lag_bins
from gorila.nets.flat import FlatParams
from gorila.params import ParameterServer
from gorila.reply import Pending
from gorila.trajectory import RemoteQueue
from gorila.types import Segment

L = TypeVar("L")


class SegmentLearner(Generic[L]):
    """A worker: each ``step()`` takes segments from its queue and, once it holds ``batch_size`` of
    them, learns from them (:meth:`_learn`, the algorithm's part: its gradients pushed to the server
    with ``loss``)::

        class ImpalaLearner(SegmentLearner[ImpalaLoss]):
            def _learn(self, batch): ...       # pull, gradient, push; then self._count_lag(batch, version)

        worker = ImpalaLearner(worker_id, server, network_fn=network_fn, loss=ImpalaLoss(gamma=0.99),
                               queues=[RemoteQueue(e) for e in endpoints], batch_size=4)
        worker.step(); worker.report()

    Learner j takes from queue ``j % len(queues)``, with one request in flight while it learns (a
    subclass's :meth:`_learn` sends it first). It sends its version with each request, so the queue
    drops segments older than ``--max-policy-lag``. An empty queue answers None: the step says it is
    blocked (the runtime backs off); empty for longer than the server's timeout, it is a
    :class:`WorkerTimeoutError`. ``policy_lag`` counts the env steps of the batches it learnt from by
    how many versions the server had moved on since they were acted (bins of
    :func:`~gorila.learners.replay_learner.lag_bins`). The report carries the loss's ``REPORTED``
    figures of the last gradient.

    On ``device="cuda"`` (``--device cuda``) the network and the loss's tensors live on the GPU; the
    parameters pulled and the gradient pushed cross to it and back once per push.
    """

    #: The figures of the loss's last ``info`` a report carries.
    REPORTED: ClassVar[tuple[str, ...]] = ("loss", "entropy")

    def __init__(self, worker_id: int, server: ParameterServer, *, network_fn: Callable[[], nn.Module],
                 loss: L, queues: list[RemoteQueue], batch_size: int, device: str = "cpu"):
        self.net = network_fn().to(device)  # before FlatParams, whose buffers live where the parameters do
        self.flat = FlatParams(self.net)
        self.loss, self.batch_size = loss, batch_size
        self.client = server.client(worker_id)
        self.timeout_s = server.timeout_s
        self.queue_index = worker_id % len(queues)
        self.queue = queues[self.queue_index]
        self.held: list[Segment] = []
        self.request: Pending[list[Segment] | None] | None = None
        self.empty_since: float | None = None
        self.pushes = 0
        self.wait_s = self.time_s = 0.0
        self.policy_lag: collections.Counter = collections.Counter()
        self.lag_sum = 0
        self.last_info: dict[str, float] = {}

    def step(self) -> bool:
        """Learns once a whole batch is held; False while the queue is empty."""
        began = time.perf_counter()
        sent_earlier = self.request is not None
        if self.request is None:
            self.request = self.queue.take(self.batch_size - len(self.held), self.client.version)
        taken = self.request.result(self.timeout_s)
        self.request = None
        if taken is None and sent_earlier:
            # The request sent while the last batch was learnt from found the queue empty then
            # (an in-process queue answers at once, before the actors' turn); ask again now.
            taken = self.queue.take(self.batch_size - len(self.held), self.client.version).result(self.timeout_s)
        self.wait_s += time.perf_counter() - began
        if taken is None:
            now = time.monotonic()
            if self.empty_since is None:
                self.empty_since = now
            if now - self.empty_since > self.timeout_s:
                raise WorkerTimeoutError(f"trajectory queue {self.queue_index} stayed empty for "
                                         f"{self.timeout_s:.0f} s: no actor adds segments")
        else:
            self.empty_since = None
            self.held.extend(taken)
            if len(self.held) >= self.batch_size:
                self._learn(Segment.concatenate(self.held))
                self.held = []
        self.time_s += time.perf_counter() - began
        return taken is not None

    def _learn(self, batch: Segment) -> None:
        """Learn from ``batch``: the algorithm's gradients, pushed; asks the queue for the next batch
        first (``self.request``) and ends with :meth:`_count_lag`."""
        raise NotImplementedError

    def _count_lag(self, batch: Segment, version: int) -> None:
        """Count ``batch``'s env steps by how far ``version`` (the one it was learnt on) had moved on."""
        lag = np.maximum(version - batch.policy_version[batch.valid], 0)
        self.lag_sum += int(lag.sum())
        self.policy_lag.update(lag_bins(lag).tolist())

    def report(self) -> dict[str, Any]:
        return {"updates_pushed": self.pushes, **{key: self.last_info.get(key) for key in self.REPORTED},
                "version": self.client.version, "learner_wait_s": self.wait_s,
                "wait_fraction": self.wait_s / self.time_s if self.time_s else None,
                "policy_lag": dict(self.policy_lag),
                "policy_lag_mean": self.lag_sum / max(sum(self.policy_lag.values()), 1), **self.client.counters()}
