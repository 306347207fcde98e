"""IMPALA's learner: V-trace gradients of the batches its trajectory queue hands it."""

from __future__ import annotations

from typing import ClassVar

from gorila.agents.impala.loss import ImpalaLoss
from gorila.learners.segment_learner import SegmentLearner
from gorila.types import Segment


class ImpalaLearner(SegmentLearner[ImpalaLoss]):
    """A worker: each ``step()`` takes segments from its queue (see
    :class:`~gorila.learners.segment_learner.SegmentLearner`) and, once it holds ``batch_size`` of
    them, computes the V-trace gradient on the parameters it pulled and pushes it::

        factory = functools.partial(ImpalaLearner, network_fn=network_fn, loss=ImpalaLoss(gamma=0.99),
                                    queues=[RemoteQueue(e) for e in endpoints], batch_size=4)
        worker = factory(worker_id, server); worker.step(); worker.report()

    A step without a whole batch pushes nothing, so under a barrier (``--mode sync``) learners in
    processes of their own could end a chunk with different numbers of pushes, one waiting at the
    barrier for a push only the other's next chunk would make: the builders refuse that setting.
    """

    REPORTED: ClassVar[tuple[str, ...]] = ("loss", "entropy", "rho_mean")

    def _learn(self, batch: Segment) -> None:
        params, version = self.client.params(), self.client.version
        # the next batch is asked for while this one is learnt from
        self.request = self.queue.take(self.batch_size, version)
        self.flat.set(params)
        grad, self.last_info = self.loss.gradients(self.net, batch, self.flat)
        self.client.push(grad, wait=self.client.blocks)
        self.pushes += 1
        self._count_lag(batch, version)
