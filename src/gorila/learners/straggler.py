"""An injected straggler: one worker whose gradients take a given factor longer.

Real runs can then be compared with ``gorila simulate --slow-worker F``, which predicts the same
cluster with worker 0 that much slower. The extra time is spent sleeping, so the slow worker
holds no core while it lags (as a worker waiting on a slow disk or a busy host would)::

    slow = Straggler.for_worker(worker_id, factor=4.0)   # only worker 0 is slowed
    started = time.perf_counter()
    grad = compute()
    slow.stretch(started)                                # sleeps 3x what compute() took
"""

from __future__ import annotations

import time

from gorila import validate

SLOW_WORKER = 0  # the worker an injected straggler slows


class Straggler:
    """Stretches the time since ``started`` to ``factor`` times itself (1: no delay)."""

    def __init__(self, factor: float = 1.0):
        validate.number("straggler", factor, low=1.0)
        self.factor = float(factor)

    @classmethod
    def for_worker(cls, worker_id: int, factor: float) -> Straggler:
        """``factor`` for the slowed worker, no delay for the others."""
        return cls(factor if worker_id == SLOW_WORKER else 1.0)

    def stretch(self, started: float) -> None:
        if self.factor > 1.0:
            time.sleep((self.factor - 1.0) * (time.perf_counter() - started))
