"""An actor worker that feeds a global replay (Gorila's global-replay mode, Ape-X's actors)."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from gorila.actors.q_actor import QActorSpec
from gorila.core import Pending
from gorila.envs.vector import Transitions
from gorila.params import ParameterServer
from gorila.replay import RemoteReplay, ShardedReplaySpec


class ReplayActor:
    """A worker: each ``step()`` pulls the newest parameters, takes ``steps_per_add`` steps of every
    env and sends them to its replay shard in one call::

        factory = functools.partial(ReplayActor, actor=QActorSpec(...), replay=[RemoteReplay(e) for e in eps],
                                    routing=replay_spec, steps_per_add=2)
        worker = factory(worker_id, server); worker.step(); worker.report()

    At most one add is in flight: its reply is collected before the next one is sent, so a slow
    replay shard slows its actors down instead of queueing their transitions. Batches are numbered
    per writer, and a restarted actor is a new writer, so no transition enters replay twice.
    """

    def __init__(self, worker_id: int, server: ParameterServer, *, actor: QActorSpec, replay: list[RemoteReplay],
                 routing: ShardedReplaySpec, steps_per_add: int):
        self.actor = actor.build(worker_id)
        self.source = server.client(worker_id)
        self.timeout_s = server.timeout_s
        shard, slot = routing.route(worker_id)
        self.replay = replay[shard]
        self.first_stream = slot * actor.envs.num_envs
        self.steps_per_add = steps_per_add
        # A restarted actor is a new writer: its batches must not be taken for redeliveries.
        self.writer = f"actor{worker_id}-{uuid.uuid4().hex}"
        self.seq = 0
        self.in_flight: Pending[int] | None = None
        self.stored = 0

    def step(self) -> None:
        self.actor.load(self.source.pull(), self.source.version)
        t = Transitions.concatenate([self.actor.act() for _ in range(self.steps_per_add)])
        t = dataclasses.replace(t, env_index=t.env_index + self.first_stream)
        self._collect()
        self.in_flight = self.replay.add(t, self.writer, self.seq)
        self.seq += 1

    def _collect(self) -> None:
        if self.in_flight is not None:
            pending, self.in_flight = self.in_flight, None
            self.stored += pending.result(self.timeout_s)

    def report(self) -> dict[str, Any]:
        return {"env_steps": self.actor.env_steps, "episodes": self.actor.episodes,
                "recent_returns": list(self.actor.recent_returns), "transitions_stored": self.stored,
                "version": self.source.version, "epsilon": self.actor.epsilon}
