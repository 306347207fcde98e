"""An actor worker that feeds a global replay (Gorila's global-replay mode, Ape-X's actors)."""

from __future__ import annotations

import collections
import dataclasses
import time
import uuid
from typing import Any

import numpy as np

from gorila.core import ActorSpec, ReplayClient
from gorila.errors import WorkerTimeoutError
from gorila.params import ParameterServer
from gorila.params.cache import CachedSource
from gorila.replay import ShardedReplaySpec
from gorila.reply import Pending
from gorila.types import Transitions


class ReplayActor:
    """A worker: each ``step()`` acts ``steps_per_add`` steps of every env and sends the rows to its
    replay shard in one call, reloading the parameters every ``refresh_every`` steps::

        factory = functools.partial(ReplayActor, actor=QActorSpec(...), replay=[RemoteReplay(e) for e in eps],
                                    routing=replay_spec, steps_per_add=2, refresh_every=2, prioritized=False)
        worker = factory(worker_id, server); worker.step(); worker.report()

    With ``refresh_every=None`` it never pulls: its actor (a
    :class:`~gorila.actors.rollout.CentralQActor`) asks the run's inference server for actions.
    With ``prioritized`` each row goes with its initial priority, the actor network's ``|TD error|``.
    At most one add is in flight: its reply is collected before the next one is sent, so a slow
    replay shard slows its actors down instead of queueing their rows. A shard whose rate limiter
    holds inserts back answers None: the batch is sent again (in order, with its number), the step
    says it is blocked (the runtime backs off), and the actor stops acting until the batch is taken
    — for longer than the server's timeout, a :class:`WorkerTimeoutError`. Batches are numbered per
    writer, and a restarted actor is a new writer, so no row enters replay twice.
    """

    def __init__(self, worker_id: int, server: ParameterServer, *, actor: ActorSpec,
                 replay: list[ReplayClient], routing: ShardedReplaySpec, steps_per_add: int,
                 refresh_every: int | None, prioritized: bool):
        self.actor = actor.build(worker_id)
        self.source = server.source(worker_id)  # its node's cache, when the run has them
        self.timeout_s = server.timeout_s
        shard, slot = routing.route(worker_id)
        self.shard, self.replay = shard, replay[shard]
        self.first_stream = slot * actor.envs.num_envs
        self.steps_per_add, self.refresh_every, self.prioritized = steps_per_add, refresh_every, prioritized
        # A restarted actor is a new writer: its batches must not be taken for redeliveries.
        self.writer = f"actor{worker_id}-{uuid.uuid4().hex}"
        self.seq = 0
        self.unsent: collections.deque[tuple[Transitions, np.ndarray | None, int]] = collections.deque()
        self.in_flight: tuple[Pending[int | None], tuple] | None = None
        self.refused_since: float | None = None
        # the first step pulls (with None it never does, see the class doc, and this is never read)
        self.steps_since_refresh = 0 if refresh_every is None else refresh_every
        self.stored = 0

    def step(self) -> bool:
        """Act and send; False while the shard's rate limiter holds this actor's rows back."""
        if not self.unsent:
            self._act()
        self._collect()
        if self.unsent:
            batch = self.unsent.popleft()
            rows, priorities, seq = batch
            self.in_flight = (self.replay.add(rows, self.writer, seq, priorities), batch)
        return self.refused_since is None

    def _act(self) -> None:
        parts = []
        for _ in range(self.steps_per_add):
            if self.refresh_every is not None:
                if self.steps_since_refresh >= self.refresh_every:
                    self.actor.load(self.source.pull(), self.source.version)
                    self.steps_since_refresh = 0
                self.steps_since_refresh += 1
            rows = self.actor.act()
            if rows is not None:
                parts.append(rows)
        if not parts:
            return
        rows = Transitions.concatenate(parts)
        rows = dataclasses.replace(rows, env_index=rows.env_index + self.first_stream)
        self.unsent.append((rows, self.actor.priorities(rows) if self.prioritized else None, self.seq))
        self.seq += 1

    def _collect(self) -> None:
        if self.in_flight is None:
            return
        (pending, batch), self.in_flight = self.in_flight, None
        stored = pending.result(self.timeout_s)
        if stored is not None:
            self.stored += stored
            self.refused_since = None
            return
        self.unsent.appendleft(batch)  # rows of a stream must arrive in order: this one goes first
        now = time.monotonic()
        self.refused_since = self.refused_since or now
        if now - self.refused_since > self.timeout_s:
            raise WorkerTimeoutError(f"replay shard {self.shard} refused this actor's rows for {self.timeout_s:.0f} s: "
                                     "its rate limiter waits for samples that no learner takes")

    def report(self) -> dict[str, Any]:
        return {**self.actor.tally.report(), "env_failures": self.actor.env_failures, "transitions_stored": self.stored,
                "version": self.actor.version, "epsilon": self.actor.epsilon,
                **(self.source.counters() if isinstance(self.source, CachedSource) else {})}
