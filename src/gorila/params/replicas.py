"""Several learners that own the parameters together (``--server learner --learners N``): each
holds a full replica of the shards and their optimizer, built from the store's state; each push is
all-reduced with the others' (the mean of the gradients pushed), and every replica applies the same
mean to the same state, so all stay bit-identical. The first learner alone publishes to the store,
as one owning learner does (:mod:`gorila.params.owned`); versions count updates as there.

Learners push when they hold data, so in one step one learner may push and another not, or push
several times (PPO's minibatches). The pushes meet in *rounds*: a round first sums two flags over
the group (how many push in it, how many have ended their step), then, if anyone pushes, the
gradients (:class:`~gorila.params.collective.Collective`). A learner whose step has ended takes
part in the rounds of the others with no gradient, and applies their mean too; the step ends on
every learner in the round where all have ended it. So the k-th step of every learner ends together,
and a chunk of steps (the same for every member of a group) ends together::

    factory = functools.partial(replicated_learner, learner, spec, Publication(), 2)
    worker = factory(k, store)     # k = 0, 1 in two processes; store: the run's ParameterServer
    worker.step(); worker.report()

A round's mean is applied as computed on the replica's current version: every gradient of a round
was computed on that version, since no round happens without every member. A learner whose group
breaks (a member died) ends its process (:func:`~gorila.params.collective.end_process`); the runtime
restarts it, every member rebuilds its replica from the store, and they meet again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gorila.errors import ConfigError
from gorila.params.client import ParameterClient, StoreEndpoint
from gorila.params.collective import Collective, CollectiveLostError, OnLost, end_process
from gorila.params.owned import OwnedEndpoint, Publication, PublishingWorker, shards_from_store
from gorila.params.server import ParameterServer, ServerSpec
from gorila.params.shard import ParameterShard, PushResult, PushTag


class Rounds:
    """One learner's side of the rounds: its replica's endpoints, the clients reading them, and
    the group. Each endpoint's part of a push waits here until the last shard's arrives; then the
    whole vector goes into one round."""

    def __init__(self, group: Collective, worker_id: int):
        self.group, self.worker_id = group, worker_id
        self.endpoints: list[ReplicaEndpoint] = []
        self.clients: list[ParameterClient] = []
        self.parts: dict[int, tuple[np.ndarray, PushTag | None]] = {}
        self.results: dict[int, PushResult] = {}
        self.rounds = 0

    def push(self, index: int, grad: np.ndarray, tag: PushTag | None) -> RoundReply:
        self.parts[index] = (np.asarray(grad, np.float32), tag)
        if len(self.parts) == len(self.endpoints):
            parts, self.parts = self.parts, {}
            flat = np.concatenate([parts[j][0] for j in range(len(self.endpoints))])
            self.results = self._round(flat, [parts[j][1] for j in range(len(self.endpoints))], ended=False)[1]
        return RoundReply(self, index)

    def end_step(self) -> None:
        """Take part in the others' rounds with no gradient until every member has ended its step;
        a round that moved the replica on leaves this learner's clients to read it again."""
        tags: list[PushTag | None] = [None] * len(self.endpoints)
        while True:
            ended, results = self._round(None, tags, ended=True)
            if results:
                for client in self.clients:
                    client.pull()
            if ended:
                return

    def _round(self, grad: np.ndarray | None, tags: list[PushTag | None],
               ended: bool) -> tuple[bool, dict[int, PushResult]]:
        """One round: whether every member has ended its step, and the results of the mean's
        push to each shard (none when no member pushed)."""
        flags = self.group.sum(np.array([grad is not None, ended], np.float64))
        self.rounds += 1
        if flags[0] == 0:
            return flags[1] == self.group.world, {}
        size = sum(e.size for e in self.endpoints)
        total = self.group.sum(grad if grad is not None else np.zeros(size, np.float32))
        mean = total / np.float32(flags[0])
        results, start = {}, 0
        for j, endpoint in enumerate(self.endpoints):
            results[j] = endpoint.apply(mean[start:start + endpoint.size], self.worker_id, tags[j])
            start += endpoint.size
        return False, results


class RoundReply:
    """A shard's reply to its part of a push: ready once the push's round has been applied."""

    def __init__(self, rounds: Rounds, index: int):
        self.rounds, self.index = rounds, index

    def ready(self) -> bool:
        return self.index in self.rounds.results

    def result(self, timeout_s: float) -> PushResult:
        return self.rounds.results[self.index]


class ReplicaEndpoint(OwnedEndpoint):
    """Shard ``index`` of one learner's replica: a push joins the group's round (:class:`Rounds`),
    whose mean is applied here; it publishes to the store only on the first learner."""

    def __init__(self, owned: OwnedEndpoint, rounds: Rounds, index: int):
        super().__init__(owned.shard, owned.store, owned.publication, owned.timeout_s, owned.publishes)
        self.rounds, self.index = rounds, index
        self.size = owned.shard.pull()[0].size

    def push(self, grad: np.ndarray, version: int, worker_id: int,  # type: ignore[override]
             tag: PushTag | None = None) -> RoundReply:
        return self.rounds.push(self.index, grad, tag)

    def apply(self, mean: np.ndarray, worker_id: int, tag: PushTag | None) -> PushResult:
        """The round's mean, as computed on this shard's current version (see the module)."""
        return super().push(mean, self.shard.version, worker_id, tag).result(0.0)


@dataclass(frozen=True)
class ReplicaServer(ParameterServer):
    """One learner's replica as its learner sees it: a server whose clients are noted, so that
    a round the learner did not push in (it had ended its step) refreshes their copies."""

    rounds: Rounds | None = field(default=None, compare=False)

    def client(self, worker_id: int = 0, *, cached: bool = False) -> ParameterClient:
        client = super().client(worker_id, cached=cached)
        if self.rounds is not None:
            self.rounds.clients.append(client)
        return client


class ReplicaWorker(PublishingWorker):
    """A learner worker on a replica: each step ends with the group's end-of-step rounds; a lost
    group is handed to ``on_lost`` (the process ends, by default)."""

    def __init__(self, learner: Any, endpoints: list[OwnedEndpoint], rounds: Rounds, on_lost: OnLost):
        super().__init__(learner, endpoints)
        self.rounds, self.on_lost = rounds, on_lost

    def step(self) -> Any:
        try:
            out = self.learner.step()
            self.rounds.end_step()
        except CollectiveLostError as error:
            self.on_lost(error)
            raise
        return self.published_after(out)

    def report(self) -> dict[str, Any]:
        return {**super().report(), "collective_rounds": self.rounds.rounds}

    def close(self) -> None:
        super().close()
        self.rounds.group.close()


def replica_server(shards: list[tuple[ParameterShard, StoreEndpoint]], store: ParameterServer, spec: ServerSpec,
                   publication: Publication, worker_id: int, group: Collective) -> tuple[ReplicaServer, Rounds]:
    """Learner ``worker_id``'s replica: ``shards`` (:func:`~gorila.params.owned.shards_from_store`,
    built from ``spec``, whose rule is a single learner's: the group's mean is one push) and the
    store's endpoints beside them."""
    rounds = Rounds(group, worker_id)
    for j, (shard, store_endpoint) in enumerate(shards):
        owned = OwnedEndpoint(shard, store_endpoint, publication, store.timeout_s, publishes=worker_id == 0)
        rounds.endpoints.append(ReplicaEndpoint(owned, rounds, j))
    server = ReplicaServer(tuple(rounds.endpoints), store.layout, spec.rule, store.timeout_s, rounds=rounds)
    # The replicas must start alike: a member that read the store after another published would not.
    versions = np.array([[e.shard.version, -e.shard.version] for e in rounds.endpoints], np.float64)
    group.max(versions)
    if (versions[:, 0] != -versions[:, 1]).any():
        raise CollectiveLostError(f"the learners' replicas started from different versions of the store "
                                  f"({-versions[:, 1].astype(int)} to {versions[:, 0].astype(int)})")
    return server, rounds


def replicated_learner(learner: Callable[..., Any], spec: ServerSpec, publication: Publication, members: int,
                       worker_id: int, store: ParameterServer, *, on_lost: OnLost = end_process,
                       **learner_args: Any) -> ReplicaWorker:
    """``learner(worker_id, server, **learner_args)`` on learner ``worker_id``'s replica (of
    ``members``), met with the others through the store's rendezvous: the learner group's factory
    under ``--server learner --learners N``."""
    if store.rendezvous is None:
        raise ConfigError("learners", "several learners that own the parameters meet through the runtime's "
                                      "rendezvous, which this runtime does not start: use --runtime ray")
    try:
        # The store is read before the group meets: no member can publish before every one has read it.
        shards = shards_from_store(store, spec)
        group = Collective.join(store.rendezvous, worker_id, members, store.timeout_s)
        server, rounds = replica_server(shards, store, spec, publication, worker_id, group)
    except CollectiveLostError as error:
        on_lost(error)
        raise
    return ReplicaWorker(learner(worker_id, server, **learner_args), list(rounds.endpoints), rounds, on_lost)
