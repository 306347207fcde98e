"""A worker's side of the parameter server, independent of where the shards live."""

from __future__ import annotations

import secrets
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, Protocol, overload

import numpy as np

from gorila.params.broadcast import Broadcast
from gorila.params.cache import CachedSource, CacheSpec
from gorila.params.layout import ShardLayout
from gorila.params.shard import ParameterShard, PushResult, PushTag
from gorila.reply import Done, Pending, ServiceEndpoint


class ShardEndpoint(Protocol):
    """How a client reaches one shard: in process, or a Ray worker (see ``gorila.runtime``)."""

    def push(self, grad: np.ndarray, version: int, worker_id: int, tag: PushTag) -> Pending[PushResult]: ...
    def pull(self) -> Pending[tuple[np.ndarray, int]]: ...
    def version(self) -> Pending[int]:
        """The shard's version alone, without its parameters (a cache's cheap probe)."""
    def wait_version(self, at_least: int, wait_s: float) -> Pending[int]:
        """The shard's version once it is ``at_least``, or after ``wait_s`` if it is not by then
        (shards that cannot block, in this process or spread over the workers, answer at once)."""
    def connect(self) -> None:
        """Set up this process's transport to the shard now, rather than on the first push or pull."""
    def subscribe(self, name: str, endpoint: ServiceEndpoint, held: int) -> Pending[int]:
        """Have the shard send each new version after ``held`` to ``endpoint`` (a cache named
        ``name``, :mod:`gorila.params.broadcast`); answers the shard's version."""


class StoreEndpoint(ShardEndpoint, Protocol):
    """A shard a learner that owns the parameters publishes to (``--server learner``): its whole
    state to start from, and publications to take (see :mod:`gorila.params.owned`)."""

    def state_dict(self) -> Pending[dict[str, np.ndarray]]: ...
    def publish(self, state: dict[str, np.ndarray]) -> Pending[None]:
        """Send the learner's publication (:meth:`~gorila.params.shard.ParameterShard.publication`).
        Whatever is kept of ``state`` (a copy, a serialisation) is taken before this returns: its
        parameters are the learner's own array, which its next step moves."""


class LocalEndpoint:
    """A shard in this process; replies are immediate. Each push and pull holds the shard's lock:
    a thread of this process (a central inference server's) may pull while a worker pushes, and
    must never copy a half-applied update."""

    def __init__(self, shard: ParameterShard, lock: threading.Lock | None = None):
        self.shard = shard
        self.lock = lock if lock is not None else threading.Lock()
        self.broadcast: Broadcast | None = None  # once a cache subscribes

    def push(self, grad: np.ndarray, version: int, worker_id: int, tag: PushTag | None = None) -> Done[PushResult]:
        with self.lock:
            result = self.shard.push(grad, version, worker_id, tag=tag)
            if result.applied and self.broadcast is not None:
                self.broadcast.advanced(self.shard.version)
            return Done(result)

    def pull(self) -> Done[tuple[np.ndarray, int]]:
        with self.lock:
            return Done(self.shard.pull())

    def version(self) -> Done[int]:
        return Done(self.shard.version)

    def wait_version(self, at_least: int, wait_s: float) -> Done[int]:
        """The version at once: only this process could move it on, and it is the one asking."""
        return Done(self.shard.version)

    def connect(self) -> None:
        """Nothing to set up: the shard is in this process."""

    def subscribe(self, name: str, endpoint: ServiceEndpoint, held: int) -> Done[int]:
        """Send each new version to the cache at ``endpoint``, from a thread of this process."""
        with self.lock:
            if self.broadcast is None:
                self.broadcast = Broadcast(self._current, self.shard.shard_id, self.shard.version, timeout_s=60.0)
            broadcast = self.broadcast
        return Done(broadcast.subscribe(name, endpoint, held))

    def _current(self) -> tuple[np.ndarray, int]:
        with self.lock:
            return self.shard.current()

    def state_dict(self) -> Done[dict[str, np.ndarray]]:
        """The shard's whole state (what a learner that owns the parameters starts from)."""
        with self.lock:
            return Done(self.shard.state_dict())

    def publish(self, state: dict[str, np.ndarray]) -> Done[None]:
        """Take the owning learner's publication (:meth:`ParameterShard.publish`)."""
        with self.lock:
            self.shard.publish(state)
            if self.broadcast is not None:
                self.broadcast.advanced(self.shard.version)
        return Done(None)


@dataclass(frozen=True)
class ClientPush:
    """The outcome of one client push over all shards."""

    outcomes: tuple[str, ...]
    applied: bool
    refreshed: bool  # the client's parameters changed with this reply

    @property
    def rejected(self) -> bool:
        return "rejected" in self.outcomes


class ParameterClient:
    """Holds a worker's copy of the flat parameters and the version of each shard; the
    :class:`~gorila.core.ParamSource` of actors and the push side of learners::

        client = server.client(worker_id=k)    # a ParameterServer knows the layout and the rule
        w = client.params()     # pulls on first use, and when a barrier push left it behind
        client.push(grad)       # gradient computed on w; the reply may carry fresh params

    A pushed gradient is labelled with the versions of the parameters :meth:`params` (or
    :meth:`pull`) last handed out, the ones it was computed on, even when a reply that arrived
    since has moved the client's copy on. With a barrier rule whose shards answer before the next
    version exists (in-process shards cannot block), the client marks itself behind and pulls on
    the next ``params()``.

    Every push carries a :class:`PushTag`: this client's number and the push's, so a redelivered
    push is dropped, and each shard's epoch as of the reply that last brought its parameters. A
    shard restored after a crash refuses a push labelled with an older epoch (``"restarted"``)
    and sends its parameters: the client's version of that shard goes back, and the next gradient
    is computed on the restored parameters. ``rejections`` counts rejected pushes by reason.

    ``pipelined`` (the rule's, :attr:`UpdateRule.pipelined`) says how a learner pushes
    (:attr:`blocks`): a client that is not pipelined waits for every reply, which brings the
    server's parameters whenever it is behind, so its next gradient is computed on them (the
    semi-async write-up's client, and the barrier's); a pipelined one computes while the reply
    travels. With
    ``wait_when_behind`` as well (:attr:`UpdateRule.waits_when_behind`) a pipelined client whose
    last push came back uncounted or rejected has fallen behind: :meth:`params` then waits for the
    reply of the push in flight. While pushes come back counted, pipelining stays: ``params()``
    takes a reply only if it has already arrived. ``blocked_s`` is the time spent waiting for
    replies (:meth:`counters`).

    With ``cache`` (the node's parameter cache, Menger's), the client is a learner that also acts
    (A3C's worker): its pushes ask for no parameters back, and :meth:`params` reads the node's
    cache instead. When the rule wants the next gradient computed on what the server holds (a
    barrier's next version, or a semi-async client behind), the read waits for the cache to hold
    the version the reply named; otherwise it takes the newest version the cache holds.
    """

    def __init__(self, endpoints: list[ShardEndpoint], layout: ShardLayout, worker_id: int = 0,
                 barrier: bool = False, timeout_s: float = 120.0, wait_when_behind: bool = False,
                 cache: CacheSpec | None = None, pipelined: bool = False):
        if len(endpoints) != layout.num_shards:
            raise ValueError(f"{len(endpoints)} endpoints for {layout.num_shards} shards")
        self.endpoints = endpoints
        self.layout = layout
        self.worker_id = worker_id
        self.barrier = barrier
        self.timeout_s = timeout_s
        self.wait_when_behind = wait_when_behind
        self.pipelined = pipelined
        self.blocked_s = 0.0  # waiting for push replies
        self._first_use: float | None = None  # when params() or pull() first handed out parameters
        self.behind = False  # the last push came back uncounted or rejected
        self._flat = np.zeros(layout.size, np.float32)
        self._parts = layout.split(self._flat)
        self.versions = [-1] * layout.num_shards  # -1: never pulled
        # The versions of the copy params() last handed out: what the next gradient is computed on.
        self._computed_on = list(self.versions)
        self.epochs = [0] * layout.num_shards  # each shard's epoch, from the replies with parameters
        self._computed_epochs = list(self.epochs)
        self.client_id = secrets.randbits(63)  # a restarted worker is a new client: its numbers start again
        self._seq = -1
        self.outcomes: Counter[str] = Counter()
        self.rejections: Counter[str] = Counter()
        self._in_flight: list[Pending[PushResult]] | None = None
        # Reads into this client's copy; falls back to a client of its own while the cache is gone.
        self.reader = None if cache is None else CachedSource(
            cache, ParameterClient(endpoints, layout, worker_id, timeout_s=timeout_s), out=self._flat)
        self._needed = 0  # with a cache: the version params() must hand out at least

    @property
    def version(self) -> int:
        """The oldest shard version this client holds (shards advance together)."""
        return min(self.versions)

    def wait_version(self, at_least: int, wait_s: float) -> int:
        """The server's version (its oldest shard's) once every shard has reached ``at_least``,
        or after about ``wait_s`` if one has not; pulls nothing. Each shard blocks on its side
        (where it can), so waiting costs one call per shard, not a poll::

            if client.wait_version(v, wait_s=0.25) >= v: w = client.pull()
        """
        pending = [ep.wait_version(at_least, wait_s) for ep in self.endpoints]
        return min(p.result(wait_s + self.timeout_s) for p in pending)

    def connect(self) -> None:
        """Set up the transport to every shard now (a first push or pull would otherwise pay for it)."""
        for endpoint in self.endpoints:
            endpoint.connect()

    def params(self) -> np.ndarray:
        """The current flat parameters (this client's buffer; copy it to keep it).

        A pipelined push whose reply has already arrived is collected first, so the next
        gradient is computed on the freshest parameters this client can have without waiting;
        one still on its way is waited for when this client is behind (``wait_when_behind``)."""
        if self._in_flight is not None and (
                (self.wait_when_behind and self.behind) or all(p.ready() for p in self._in_flight)):
            self.complete()
        if self.reader is not None:
            self.reader.pull(at_least=self._needed)
            self.versions = [self.reader.version] * self.layout.num_shards
        stale = [i for i, v in enumerate(self.versions) if v < 0]
        if stale:
            self._pull(stale)
        return self._handed_out()

    def pull(self) -> np.ndarray:
        """Fetch every shard's current parameters now."""
        self._pull(range(self.layout.num_shards))
        return self._handed_out()

    def _handed_out(self) -> np.ndarray:
        self._computed_on, self._computed_epochs = list(self.versions), list(self.epochs)
        if self._first_use is None:
            self._first_use = time.perf_counter()
        return self._flat

    @property
    def blocks(self) -> bool:
        """Whether this client's pushes wait for their replies, as its rule says (a barrier's, the
        semi-async client's); a learner pushes with ``push(grad, wait=client.blocks)``."""
        return not self.pipelined

    @overload
    def push(self, grad: np.ndarray, wait: Literal[True] = True) -> ClientPush: ...
    @overload
    def push(self, grad: np.ndarray, wait: bool) -> ClientPush | None: ...

    def push(self, grad: np.ndarray, wait: bool = True) -> ClientPush | None:
        """Push a flat gradient computed on ``params()``; all shards are sent to before any wait.

        With ``wait=False`` the reply is collected later (by :meth:`complete`, or the next push,
        pull or ``params()``), so the worker can compute its next gradient while this one travels:
        that gradient is then computed on parameters one version older, and labelled so. A learner
        waits as its rule says (:attr:`blocks`).
        """
        labels, epochs = self._computed_on, self._computed_epochs  # before the previous reply moves the copy on
        self.complete()
        self._seq += 1
        reply_params = self.reader is None  # a client that reads a cache wants none back
        pending = [ep.push(g, v, self.worker_id, PushTag(e, self.client_id, self._seq, reply_params))
                   for ep, g, v, e in zip(self.endpoints, self.layout.split(grad), labels, epochs)]
        if not wait:
            self._in_flight = pending
            return None
        return self._collect(pending)

    def complete(self) -> ClientPush | None:
        """Wait for the reply of a ``push(wait=False)`` still in flight, if any."""
        if self._in_flight is None:
            return None
        pending, self._in_flight = self._in_flight, None
        return self._collect(pending)

    def _collect(self, pending: list[Pending[PushResult]]) -> ClientPush:
        began = time.perf_counter()
        results = [p.result(self.timeout_s) for p in pending]
        self.blocked_s += time.perf_counter() - began
        outcomes, applied, refreshed = [], False, False
        for i, result in enumerate(results):
            outcomes.append(result.outcome)
            self.outcomes[result.outcome] += 1
            if result.reason is not None:
                self.rejections[result.reason] += 1
            applied |= result.applied
            if result.params is not None:
                np.copyto(self._parts[i], result.params)
                self.versions[i], self.epochs[i] = result.version, result.epoch
                refreshed = True
            elif self.barrier and result.outcome != "rejected" and result.version == self.versions[i]:
                self.versions[i] = -1
        self.behind = any(outcome != "counted" for outcome in outcomes)
        if self.reader is not None and (self.barrier or (self.wait_when_behind and self.behind)):
            self._needed = max(self._needed, min(result.version for result in results))
        return ClientPush(tuple(outcomes), applied, refreshed)

    def counters(self) -> dict[str, float]:
        """``push_blocked_s``: seconds this client waited for push replies; ``push_blocked_fraction``:
        their share of the time since it first handed out parameters (a worker's report carries them)."""
        alive = 0.0 if self._first_use is None else time.perf_counter() - self._first_use
        return {"push_blocked_s": self.blocked_s, "push_blocked_fraction": self.blocked_s / alive if alive else 0.0}

    def close(self) -> None:
        """Let go of the node's cache, if this client reads one."""
        if self.reader is not None:
            self.reader.close()

    def _pull(self, indices: Iterable[int]) -> None:
        self.complete()  # an older reply must not land on top of what this pull brings
        pending = [(i, self.endpoints[i].pull()) for i in indices]
        for i, p in pending:
            params, version = p.result(self.timeout_s)
            np.copyto(self._parts[i], params)
            self.versions[i] = version
