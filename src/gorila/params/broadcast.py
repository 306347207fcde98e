"""Each new version of the parameters sent, unasked, to the caches subscribed to it (Menger: "the
learner only sends the updated model to the caches").

A source of versions (a parameter shard, the server's or the store an owning learner publishes to,
or a rack's cache) keeps a :class:`Broadcast`; each cache that wants the source's versions
subscribes to it, naming itself and the version it holds::

    broadcast = Broadcast(read=host.current, source=0, version=host.version, timeout_s=60.0)
    broadcast.subscribe("gorila-ab12-params-node3", cache_endpoint, held=41)
    broadcast.advanced(42)     # the source's version moved: every subscriber is sent the newest
    broadcast.close()

A subscriber is reached through a service endpoint whose ``deliver(source, part, version)`` takes a
part (:meth:`ParamCache.deliver <gorila.params.cache.ParamCache.deliver>`). Each subscriber has a
sender of its own, so a slow or restarting cache holds back no other: its sender sends one version
at a time, and when that send is answered sends the newest there is then, never the versions that
came and went meanwhile. A send that fails (the cache restarting) is tried again, with the newest
version, after ``retry_s``; a cache that stays behind catches up by a pull of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from gorila.reply import ServiceEndpoint

#: How long a sender with nothing to send waits before it looks again (a bound on every wait).
IDLE_S = 1.0


class _Sender:
    """The thread that sends one subscriber each new version (see the module doc)."""

    def __init__(self, broadcast: Broadcast, endpoint: ServiceEndpoint, held: int):
        self.broadcast, self.endpoint, self.sent = broadcast, endpoint, held
        self.thread = threading.Thread(target=self._run, name="param-broadcast", daemon=True)
        self.thread.start()

    def _due(self) -> bool:
        return self.broadcast.stopped or self.broadcast.version != self.sent

    def _run(self) -> None:
        broadcast = self.broadcast
        while True:
            with broadcast.changed:
                if not broadcast.changed.wait_for(self._due, timeout=IDLE_S):
                    continue
                if broadcast.stopped:
                    return
            part, version = broadcast.read()  # the newest, read once the lock above is released
            try:
                self.endpoint.call("deliver", broadcast.source, part, version).result(broadcast.timeout_s)
            except Exception:  # the cache restarting or gone: the newest version, once it answers again
                broadcast.failures += 1
                broadcast.stop.wait(broadcast.retry_s)
                continue
            self.sent = version
            broadcast.sends += 1


class Broadcast:
    """The subscribers of one source of versions and their senders (see the module doc).

    ``read`` returns a copy of the source's parameters and their version (called by the senders,
    never with a lock of the broadcast held); ``source`` is the index a subscriber files the part
    under (a shard's id, 0 for a cache's whole vector); ``version`` the source's now. ``sends``
    counts the versions sent, ``failures`` the sends that did not arrive.
    """

    def __init__(self, read: Callable[[], tuple[np.ndarray, int]], source: int, version: int, timeout_s: float,
                 retry_s: float = 0.25):
        self.read, self.source, self.timeout_s, self.retry_s = read, source, timeout_s, retry_s
        self.changed = threading.Condition()
        self.stop = threading.Event()
        self.version = version
        self.sends = self.failures = 0
        self._senders: dict[str, _Sender] = {}

    @property
    def stopped(self) -> bool:
        return self.stop.is_set()

    def subscribe(self, name: str, endpoint: ServiceEndpoint, held: int) -> int:
        """Send every version after ``held`` to ``endpoint`` from now on. A cache subscribes again
        at every probe (a restarted source has forgotten it): a subscriber already known by
        ``name`` is reached at ``endpoint`` from now on. Returns the source's version."""
        with self.changed:
            if name in self._senders:
                self._senders[name].endpoint = endpoint
            elif not self.stopped:
                self._senders[name] = _Sender(self, endpoint, held)
            return self.version

    def advanced(self, version: int) -> None:
        """The source's version is now ``version`` (on, or back: a restored shard); never blocks
        for long, so a shard may call it with its own lock held."""
        with self.changed:
            self.version = version
            self.changed.notify_all()

    def close(self) -> None:
        self.stop.set()
        with self.changed:
            self.changed.notify_all()
        for sender in list(self._senders.values()):
            sender.thread.join(timeout=self.timeout_s)
