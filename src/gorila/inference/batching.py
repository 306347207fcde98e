"""When an inference server closes a batch: a rule as a value object, and the queue it judges.

The rule is two numbers, like :class:`~gorila.params.rule.UpdateRule`: a batch closes as soon as
``max_batch`` observations are waiting, or once the oldest waiting request has waited
``max_wait_s``, whichever comes first, and never later. The queue takes its time from a clock it is
given, so tests drive it with a fake clock instead of sleeping::

    queue = BatchQueue(BatchingRule(max_batch=64, max_wait_s=0.002), clock=time.monotonic)
    queue.add(request, size=8)
    timeout = queue.timeout()        # how long the server may block before it must close a batch
    if queue.ready():
        batch = queue.take()         # requests in arrival order, at most max_batch observations
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gorila import validate


@dataclass(frozen=True)
class BatchingRule:
    """A batch closes at ``max_batch`` waiting observations or after ``max_wait_s`` (see module doc)::

        rule = BatchingRule(max_batch=32, max_wait_s=0.005)
        rule.closes(waiting=32, waited_s=0.0)     # True: full
        rule.closes(waiting=4, waited_s=0.005)    # True: waited long enough
        rule.closes(waiting=4, waited_s=0.004)    # False
    """

    max_batch: int
    max_wait_s: float

    def __post_init__(self) -> None:
        validate.integer("inference_batch", self.max_batch, low=1)
        validate.number("inference_wait_ms", self.max_wait_s * 1e3, low=0.0)

    @classmethod
    def from_flags(cls, batch: int, wait_ms: float) -> BatchingRule:
        """The rule from ``--inference-batch`` and ``--inference-wait-ms``."""
        validate.number("inference_wait_ms", wait_ms, low=0.0)
        return cls(batch, wait_ms / 1e3)

    def closes(self, waiting: int, waited_s: float) -> bool:
        """Whether ``waiting`` observations, the oldest of which arrived ``waited_s`` ago, make a batch."""
        return waiting > 0 and (waiting >= self.max_batch or waited_s >= self.max_wait_s)


class BatchQueue:
    """Requests waiting for the policy, in arrival order, judged by a :class:`BatchingRule`.

    A request is any object with a ``size`` (its observations); the server's requests also name the
    connection they came from, so :meth:`drop` can forget a departed client's requests.
    """

    def __init__(self, rule: BatchingRule, clock: Callable[[], float] = time.monotonic):
        self.rule, self.clock = rule, clock
        self._waiting: collections.deque[tuple[float, Any, int]] = collections.deque()
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, request: Any, size: int) -> None:
        self._waiting.append((self.clock(), request, size))
        self._count += size

    def ready(self) -> bool:
        """Whether the rule closes a batch now."""
        if not self._waiting:
            return False
        return self.rule.closes(self._count, self.clock() - self._waiting[0][0])

    def timeout(self) -> float | None:
        """Seconds until the oldest request's wait runs out (0 if a batch is ready; None when
        nothing waits): the longest the server may block without closing a batch late."""
        if not self._waiting:
            return None
        if self.ready():
            return 0.0
        return max(0.0, self._waiting[0][0] + self.rule.max_wait_s - self.clock())

    def take(self) -> list[Any]:
        """The oldest requests, up to ``max_batch`` observations (always at least one request)."""
        batch: list[Any] = []
        total = 0
        while self._waiting and (not batch or total + self._waiting[0][2] <= self.rule.max_batch):
            _, request, size = self._waiting.popleft()
            batch.append(request)
            total += size
        self._count -= total
        return batch

    def drop(self, gone: Callable[[Any], bool]) -> int:
        """Forget the requests for which ``gone(request)`` holds (their client left); how many
        observations were dropped."""
        kept = [item for item in self._waiting if not gone(item[1])]
        dropped = self._count - sum(size for _, _, size in kept)
        self._waiting = collections.deque(kept)
        self._count -= dropped
        return dropped
