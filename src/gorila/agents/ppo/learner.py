"""A PPO / APPO learner: a queue-fed learner that runs several epochs of minibatches per batch."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from torch import nn

from gorila.agents.ppo.loss import PPOLoss
from gorila.learners.segment_learner import SegmentLearner
from gorila.params import ParameterServer
from gorila.trajectory import RemoteQueue
from gorila.types import Segment


class PPOLearner(SegmentLearner[PPOLoss]):
    """A worker: once it holds ``batch_size`` segments (with ``--mode sync``, one per actor), it
    computes their advantages and returns on the parameters it pulled, then runs ``epochs`` passes
    of ``minibatches`` shuffled minibatches, each gradient pushed and waited for, so that the next
    minibatch is computed on the parameters it produced::

        factory = functools.partial(PPOLearner, network_fn=network_fn, loss=PPOLoss(lam=0.95),
                                    queues=[RemoteQueue(e) for e in endpoints], batch_size=2,
                                    epochs=4, minibatches=4, seed=0)
        worker = factory(worker_id, server); worker.step()      # epochs x minibatches pushes

    Every step pushes the same number of gradients, so learners under a barrier stay in step.
    The ratio's denominator is the behaviour policy's log-probabilities carried by the segments.
    """

    def __init__(self, worker_id: int, server: ParameterServer, *, network_fn: Callable[[], nn.Module],
                 loss: PPOLoss, queues: list[RemoteQueue], batch_size: int, epochs: int, minibatches: int,
                 seed: int, device: str = "cpu") -> None:
        super().__init__(worker_id, server, network_fn=network_fn, loss=loss, queues=queues, batch_size=batch_size,
                         device=device)
        self.epochs, self.minibatches = epochs, minibatches
        self.rng = np.random.default_rng(seed + 1000 * worker_id)

    def _learn(self, batch: Segment) -> None:
        params, version = self.client.params(), self.client.version
        self.request = self.queue.take(self.batch_size, version)  # the next batch while this one is used
        self.flat.set(params)
        targets = self.loss.targets(self.net, batch)
        for _ in range(self.epochs):
            for idx in np.array_split(self.rng.permutation(len(targets)), self.minibatches):
                self.flat.set(self.client.params())
                grad, self.last_info = self.loss.gradient(self.net, self.flat, targets.select(idx))
                self.client.push(grad, wait=True)
                self.pushes += 1
        self._count_lag(batch, version)
