"""The trajectory queue: a bounded FIFO of segments between actors and learners (Reverb's ``Queue``
table), hosted by a runtime as a service and reached through :class:`RemoteQueue`."""

from __future__ import annotations

import collections
from typing import Any

from gorila import validate
from gorila.reply import Pending, ServiceEndpoint
from gorila.types import Segment


class TrajectoryQueue:
    """A service: actors ``add`` segments, learners ``take`` them, oldest first::

        queue = TrajectoryQueue(0, capacity=64, max_policy_lag=20)
        queue.add(segment, writer="actor0-3f2a", seq=0)    # 1, or None while the queue is full
        queue.take(4, learner_version=120)                 # up to 4 segments, or None when empty

    A full queue answers None to ``add`` (the replay shards' back-pressure): the actor sends the same
    segment again and stops acting meanwhile. Segments are numbered per writer and a redelivered
    one (a number seen already) is dropped, so none is queued twice. With ``max_policy_lag`` K,
    ``take`` drops segments whose oldest action was chosen more than K versions before
    ``learner_version`` (Sample Factory's ``max_policy_lag``), counted in ``dropped_stale``.
    """

    def __init__(self, queue_id: int, capacity: int, max_policy_lag: int | None = None):
        validate.integer("queue_capacity", capacity, low=1)
        if max_policy_lag is not None:
            validate.integer("max_policy_lag", max_policy_lag, low=0)
        self.queue_id, self.capacity, self.max_policy_lag = queue_id, capacity, max_policy_lag
        self.segments: collections.deque[Segment] = collections.deque()
        self.last_seq: dict[str, int] = {}
        self.added = self.taken = self.refused = self.dropped_stale = self.duplicates = 0

    def add(self, segment: Segment, writer: str, seq: int) -> int | None:
        """1 when queued (or already queued under this number), None when the queue is full."""
        if seq <= self.last_seq.get(writer, -1):
            self.duplicates += 1
            return 1
        if len(self.segments) >= self.capacity:
            self.refused += 1
            return None
        self.segments.append(segment)
        self.last_seq[writer] = seq
        self.added += 1
        return 1

    def take(self, n: int, learner_version: int | None = None) -> list[Segment] | None:
        """Up to ``n`` of the oldest fresh-enough segments; None when none is left."""
        taken: list[Segment] = []
        while self.segments and len(taken) < n:
            segment = self.segments.popleft()
            if (self.max_policy_lag is not None and learner_version is not None
                    and learner_version - segment.oldest_version > self.max_policy_lag):
                self.dropped_stale += 1
                continue
            taken.append(segment)
        self.taken += len(taken)
        return taken or None

    def size(self) -> int:
        return len(self.segments)

    def room(self) -> int:
        """How many segments ``add`` would take now."""
        return self.capacity - len(self.segments)

    def stats(self) -> dict[str, Any]:
        return {"size": len(self.segments), "added": self.added, "taken": self.taken, "refused": self.refused,
                "dropped_stale": self.dropped_stale, "duplicates": self.duplicates}


class RemoteQueue:
    """The typed calls to one :class:`TrajectoryQueue` wherever it lives (picklable; the one place
    the queue's methods are named)::

        queue = RemoteQueue(endpoint)
        queue.add(segment, writer, seq).result(timeout_s)
        segments = queue.take(4, version).result(timeout_s)
    """

    def __init__(self, endpoint: ServiceEndpoint):
        self.endpoint = endpoint

    def add(self, segment: Segment, writer: str, seq: int) -> Pending[int | None]:
        return self.endpoint.call("add", segment, writer, seq)

    def take(self, n: int, learner_version: int | None = None) -> Pending[list[Segment] | None]:
        return self.endpoint.call("take", n, learner_version)

    def size(self) -> Pending[int]:
        return self.endpoint.call("size")

    def room(self) -> Pending[int]:
        return self.endpoint.call("room")

    def stats(self) -> Pending[dict]:
        return self.endpoint.call("stats")
