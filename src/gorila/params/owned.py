"""A learner that owns its parameters (``--server learner``): the shards live in the learner's
process, and the run's shards are the store its actors read.

The textbook's server (many learners, one server) makes every update a round trip: pull the whole
vector, push a gradient, let the shard's optimizer apply it in another process, on its CPU. With
one learner that round trip is pure downtime. Here the learner builds the same shards itself (the
run's :class:`~gorila.params.server.ServerSpec`: the same optimizer, update rule, safeguards and
state layout) from the store's state, applies each gradient where it was computed, and counts a
version per update. It *sends* its parameters to the store (Ape-X's broadcast): every
``every_updates`` updates, at most once every ``every_s`` (a publication through Ray costs the
learner a serialised copy of its parameters; docs/benchmarks.md, "A whole run against its limit",
measures publishing every update), and never with one still on its way, so the learner never waits
for the store. Every ``state_every_s`` a publication carries the optimizer state too, so a
checkpoint of the store (and a learner restarted from it) has all of it. With parameter caches the
store's shards send each publication on to every cache subscribed to them
(:mod:`gorila.params.broadcast`): the learner's one send reaches every node unasked (Menger's "the
learner only sends the updated model to the caches", with the store in between)::

    learner = functools.partial(ImpalaLearner, network_fn=..., loss=..., batch_size=4)
    owning = functools.partial(owning_learner, learner, spec, Publication(every_updates=1))
    worker = owning(0, store)          # store: the run's ParameterServer, which actors pull from

Actors, parameter caches and inference servers read the store exactly as they read a server; the
version they see is the learner's, so policy lag and ``--max-policy-lag`` mean what they did.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gorila import validate
from gorila.errors import ConfigError
from gorila.params.client import LocalEndpoint, StoreEndpoint
from gorila.params.server import ParameterServer, ServerSpec
from gorila.params.shard import ParameterShard, PushResult, PushTag
from gorila.reply import Done, Pending


@dataclass(frozen=True)
class Publication:
    """When an owning learner sends its parameters to the store: every ``every_updates`` updates,
    at most once every ``every_s`` (0 on the local runtime, where a publication is a copy and the
    rows must not depend on time), the optimizer state at most every ``state_every_s``::

        Publication(every_updates=4, every_s=0.1, state_every_s=10.0)

    With ``at_step_end`` the newest version is published once each learner step has ended instead
    of after each of its updates: on the local runtime, whose workers step one after another,
    nothing reads the store while the learner steps, so every reader sees the versions it saw
    before, and a step of PPO's epochs copies its parameters once instead of once per minibatch.
    Only with ``every_updates`` 1, whose readers see the newest version whenever they read.
    """

    every_updates: int = 1
    every_s: float = 0.1
    state_every_s: float = 10.0
    at_step_end: bool = False

    def __post_init__(self) -> None:
        validate.integer("publish_every", self.every_updates, low=1)
        validate.number("every_s", self.every_s, low=0.0)
        validate.number("state_every_s", self.state_every_s, low=0.0)
        if self.at_step_end and self.every_updates != 1:
            raise ConfigError("publish_every", "publishing at the end of each learner step needs "
                                               f"--publish-every 1, got {self.every_updates}")


class OwnedEndpoint(LocalEndpoint):
    """Shard ``j`` as the learner that owns it reaches it: in its own process (a
    :class:`~gorila.params.client.LocalEndpoint`), each push applied at once; its state sent to
    the store's shard ``j`` when :class:`Publication` says so::

        endpoint = OwnedEndpoint(shard, store_endpoint, Publication())
        endpoint.push(grad, version, worker_id, tag).result(1.0)
    """

    def __init__(self, shard: ParameterShard, store: StoreEndpoint, publication: Publication, timeout_s: float,
                 publishes: bool = True):
        super().__init__(shard)
        self.store, self.publication, self.timeout_s = store, publication, timeout_s
        # A replica other than the first of several learners' (gorila.params.replicas) never publishes:
        # the first one's publications are the store's, and the replicas are bit-identical.
        self.publishes = publishes
        self.published_version = self.state_version = shard.version  # what the store holds
        self.published_at = self.state_sent_at = time.monotonic()
        self.in_flight: Pending[None] | None = None
        self.publications = 0

    def push(self, grad: np.ndarray, version: int, worker_id: int, tag: PushTag | None = None) -> Done[PushResult]:
        result = super().push(grad, version, worker_id, tag)
        if result.result(0.0).applied and not self.publication.at_step_end:
            self.publish_if_due()
        return result

    def connect(self) -> None:
        self.store.connect()

    def publish_if_due(self, idle: bool = False) -> bool:
        """Send the shard's state to the store if the publication's period says so (or, ``idle``,
        if the store is behind at all) and the last one has arrived (a store that is slow is sent
        the newer version next time instead)."""
        now = time.monotonic()
        behind = self.shard.version - self.published_version
        due = behind >= 1 if idle else (behind >= self.publication.every_updates
                                         and now - self.published_at >= self.publication.every_s)
        if not self.publishes or not due:
            return False
        if self.in_flight is not None:
            if not self.in_flight.ready():
                return False
            self.in_flight.result(self.timeout_s)  # a store that refused it says so here
        with_state = now - self.state_sent_at >= self.publication.state_every_s
        self.in_flight = self.store.publish(self.shard.publication(optimizer=with_state))
        self.published_version, self.published_at = self.shard.version, now
        if with_state:
            self.state_sent_at, self.state_version = now, self.shard.version
        self.publications += 1
        return True

    def flush(self) -> None:
        """Publish the newest version with the optimizer state now, unless the store has both, and
        wait for it (the end of a chunk: a row or a checkpoint may come next)."""
        if not self.publishes:
            return
        if self.in_flight is not None:
            self.in_flight.result(self.timeout_s)
            self.in_flight = None
        if self.state_version == self.shard.version:
            return
        self.store.publish(self.shard.publication(optimizer=True)).result(self.timeout_s)
        self.published_version = self.state_version = self.shard.version
        self.published_at = self.state_sent_at = time.monotonic()
        self.publications += 1


def owned_server(store: ParameterServer, spec: ServerSpec, publication: Publication) -> ParameterServer:
    """A server whose shards live in this process, built from ``spec`` and started from the
    store's state (a new run's initial parameters, a resumed run's checkpoint, or what this
    learner published before it was restarted); ``store`` stays where actors read."""
    endpoints = [OwnedEndpoint(shard, store_endpoint, publication, store.timeout_s)
                 for shard, store_endpoint in shards_from_store(store, spec)]
    return ParameterServer(tuple(endpoints), store.layout, spec.rule, store.timeout_s)


def shards_from_store(store: ParameterServer, spec: ServerSpec) -> list[tuple[ParameterShard, StoreEndpoint]]:
    """Each shard of ``store`` rebuilt in this process from ``spec`` and the state the store holds
    now, beside the store's endpoint it publishes to."""
    out = []
    for j, endpoint in enumerate(store.endpoints):
        if not hasattr(endpoint, "publish"):
            raise ConfigError("server", "learner needs shards a learner can publish to")
        store_endpoint: StoreEndpoint = endpoint  # type: ignore[assignment]  # checked just above
        state = store_endpoint.state_dict().result(store.timeout_s)
        shard = spec.build_shard(np.array(state["params"], np.float32), store.layout.size, j)
        shard.load_state_dict({k: np.array(v) for k, v in state.items()})  # arrays from Ray are read-only
        out.append((shard, store_endpoint))
    return out


def owning_learner(learner: Callable[..., Any], spec: ServerSpec, publication: Publication, worker_id: int,
                   store: ParameterServer, **learner_args: Any) -> PublishingWorker:
    """``learner(worker_id, server, **learner_args)`` (a worker factory and what the plan adds to it,
    its queues) built on parameters it owns (:func:`owned_server`), each of its chunks ending with
    a publication: the learner group's factory under ``--server learner``."""
    server = owned_server(store, spec, publication)
    endpoints = [e for e in server.endpoints if isinstance(e, OwnedEndpoint)]
    return PublishingWorker(learner(worker_id, server, **learner_args), endpoints)


class PublishingWorker:
    """A learner worker whose parameters are its own: its steps are the learner's, and its report,
    which ends every chunk, first publishes its newest version with the optimizer state (so the
    driver's rows and checkpoints, and the actors' next chunk, see it)::

        worker = PublishingWorker(learner, endpoints); worker.step(); worker.report()
    """

    def __init__(self, learner: Any, endpoints: list[OwnedEndpoint]):
        self.learner, self.endpoints = learner, endpoints

    def step(self) -> Any:
        return self.published_after(self.learner.step())

    def published_after(self, progressed: Any) -> Any:
        """``progressed`` (a learner step's answer), once what the step's end publishes is sent:
        the newest version after every step with a publication ``at_step_end``, and whatever the
        period when the answer is False: the learner waits for data, so sending it costs the
        learner nothing now, and the actors may be waiting for exactly that version (synchronous
        PPO's rounds), which the publication's period would otherwise hold back until the chunk ends."""
        for endpoint in self.endpoints:
            if progressed is False or endpoint.publication.at_step_end:
                endpoint.publish_if_due(idle=True)
        return progressed

    def report(self) -> dict[str, Any]:
        for endpoint in self.endpoints:
            endpoint.flush()
        report = dict(self.learner.report())
        report["publications"] = sum(e.publications for e in self.endpoints)
        return report

    def close(self) -> None:
        if hasattr(self.learner, "close"):
            self.learner.close()
