"""Replay as a service: one shard of a global replay that actors add to and learners sample from.

A runtime hosts each :class:`ReplayShard` as a worker (``RLPlan.services``); other workers reach
it through a ``ServiceEndpoint``::

    pending = endpoint.call("add_batch", obs, action, reward, next_obs, terminated, streams, writer, seq)
    pending.result(timeout_s)                      # rows stored
    batch = endpoint.call("sample", 32).result(timeout_s)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gorila.replay.memory import check_replay_memory, make_storage
from gorila.replay.storage import Batch


class ReplayShard:
    """One replay shard: a ring storage, uniform sampling, and at-most-once adds::

        shard = ReplayShard(0, capacity=50_000, obs_shape=(4,), obs_dtype=np.float32, num_streams=2, seed=0)
        shard.add_batch(obs, action, reward, next_obs, terminated, streams, writer="actor-3f2a", seq=0)
        shard.add_batch(obs, action, reward, next_obs, terminated, streams, writer="actor-3f2a", seq=0)  # -> 0
        shard.ready(step=0, min_size=1000)   # False until it holds 1000 transitions
        batch = shard.sample(32)             # a Batch of numpy arrays

    A writer numbers its batches 0, 1, 2, ...; a batch whose number is not above the last one
    stored from that writer is a redelivery (a retried call) and is dropped, so every transition
    enters at most once. ``streams`` name the environment each row came from (one stream per
    actor environment), so stacked Atari frames are stored once. The storage's size is checked
    against this machine's free memory when the shard is built.

    ``step()`` does nothing and ``report()`` returns counters: the runtime treats a service as a
    worker, but nothing steps it; others call it.
    """

    def __init__(self, shard_id: int, capacity: int, obs_shape: tuple[int, ...], obs_dtype, *,
                 num_streams: int = 1, seed: int = 0):
        check_replay_memory(capacity, obs_shape, obs_dtype)
        self.shard_id = shard_id
        self.storage = make_storage(capacity, tuple(obs_shape), obs_dtype, num_streams=num_streams)
        self.rng = np.random.default_rng([seed, shard_id])
        self.last_seq: dict[str, int] = {}
        self.open_at: int | None = None
        self.latest_refused = -1
        self.added = 0
        self.duplicates = 0
        self.sampled = 0

    def add_batch(self, obs, action, reward, next_obs, terminated, streams=None,
                  writer: str | None = None, seq: int | None = None) -> int:
        """Store the rows (in order within each stream); returns how many were stored."""
        if writer is not None:
            if seq <= self.last_seq.get(writer, -1):
                self.duplicates += 1
                return 0
            self.last_seq[writer] = seq
        self.storage.add_batch(obs, action, reward, next_obs, terminated, streams=streams)
        self.added += len(action)
        return len(action)

    def sample(self, batch_size: int) -> Batch:
        """``batch_size`` transitions drawn uniformly with replacement (``ValueError`` while empty)."""
        batch = self.storage.sample(batch_size, self.rng)
        self.sampled += batch_size
        return batch

    def size(self) -> int:
        return len(self.storage)

    def ready(self, step: int, min_size: int) -> bool:
        """Whether learners may sample at their step ``step``: the same answer to every learner.

        The first call that finds ``min_size`` transitions fixes the opening step, never at or
        below a step already refused; from then on the answer is ``step >= open_at``. Learners
        that step in lockstep (one push per step under a synchronous rule) therefore start
        pushing at the same step, whichever of them asked first.
        """
        if self.open_at is None:
            if len(self.storage) < min_size:
                self.latest_refused = max(self.latest_refused, step)
                return False
            self.open_at = max(step, self.latest_refused + 1)
        return step >= self.open_at

    def step(self) -> None:
        """Nothing: a replay shard only answers calls."""

    def report(self) -> dict[str, Any]:
        return {"shard": self.shard_id, "size": len(self.storage), "added": self.added,
                "duplicates": self.duplicates, "sampled": self.sampled}
