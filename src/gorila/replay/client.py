"""Typed calls to a replay shard, wherever the runtime placed it."""

from __future__ import annotations

from typing import Any

import numpy as np

from gorila.reply import Pending, ServiceEndpoint
from gorila.types import Batch, Transitions


class RemoteReplay:
    """The :class:`~gorila.core.ReplayClient` of one :class:`~gorila.replay.shard.ReplayShard`
    hosted by a runtime (picklable: actor and learner factories carry it)::

        replay = RemoteReplay(endpoint)            # endpoint: one of the services' endpoints
        stored = replay.add(transitions, writer, seq).result(timeout_s)
        batch = replay.sample(32).result(timeout_s)

    This class is where method names meet the transport: nothing else calls a shard by name.
    """

    def __init__(self, endpoint: ServiceEndpoint):
        self.endpoint = endpoint

    def add(self, transitions: Transitions, writer: str, seq: int,
            priorities: np.ndarray | None = None) -> Pending[int | None]:
        return self.endpoint.call("add", transitions, writer, seq, priorities)

    def sample(self, batch_size: int) -> Pending[Batch | None]:
        return self.endpoint.call("sample", batch_size)

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> Pending[None]:
        return self.endpoint.call("update_priorities", indices, priorities)

    def size(self) -> Pending[int]:
        return self.endpoint.call("size")

    def stats(self) -> Pending[dict[str, Any]]:
        return self.endpoint.call("stats")

    def ready(self, learner: int, step: int, min_size: int) -> Pending[bool]:
        """Whether learner ``learner`` may sample at its step ``step`` (see ``ReplayShard.ready``)."""
        return self.endpoint.call("ready", learner, step, min_size)
