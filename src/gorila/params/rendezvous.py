"""Where several learners holding replicas of the parameters (``--server learner --learners N``,
:mod:`gorila.params.replicas`) find each other: a small key-value service the runtime hosts, and
what a learner needs to reach it.

The learners' process group (:mod:`gorila.params.collective`) exchanges its members' addresses
through a ``torch.distributed`` store. torch's own ``TCPStore`` listens on every interface; this
one is a gorila service, reached as every other service is (a Ray call on a cluster), so nothing
new listens for the rendezvous at all::

    spec = RendezvousSpec(endpoint, interface=gloo_interface)   # the runtime builds it with the shards
    spec.endpoint.call("add", "joined", 1).result(5.0)          # what the store does underneath

No torch here: every process that receives a :class:`~gorila.params.ParameterServer` unpickles this.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gorila.reply import ServiceEndpoint


class Rendezvous:
    """The key-value service: bytes under string keys, and counters. Calls never block (a Ray
    service process answers one call at a time); whoever waits for a key asks again::

        kv = Rendezvous(0)              # a service factory's signature: its index
        kv.set("a", b"x"); kv.get("a")  # b"x"; None for a key not set
        kv.add("joined", 1)             # 1, then 2, ...
    """

    def __init__(self, service_id: int = 0):
        self.values: dict[str, bytes] = {}

    def set(self, key: str, value: bytes) -> None:
        self.values[key] = bytes(value)

    def get(self, key: str) -> bytes | None:
        return self.values.get(key)

    def add(self, key: str, amount: int) -> int:
        """Add ``amount`` to the counter ``key`` (0 when new) and return its new value."""
        value = int(self.values.get(key, b"0")) + amount
        self.values[key] = str(value).encode()
        return value

    def compare_set(self, key: str, expected: bytes, desired: bytes) -> bytes:
        """Set ``key`` to ``desired`` if it holds ``expected`` (empty: not set); its value after."""
        current = self.values.get(key)
        if (current is None and not expected) or current == expected:
            self.values[key] = bytes(desired)
            return bytes(desired)
        return current if current is not None else bytes(expected)

    def check(self, keys: list[str]) -> bool:
        return all(key in self.values for key in keys)

    def delete(self, key: str) -> bool:
        return self.values.pop(key, None) is not None

    def count(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class RendezvousSpec:
    """How a learner reaches the run's :class:`Rendezvous` (``endpoint``), and ``interface``: a
    function that, called in the learner's process, names the network interface its process group
    listens on (the runtime's: on Ray, the interface of the node's IP as Ray reports it, ``lo`` on
    a loopback cluster; None: gloo's own choice, the interface of the host's name)."""

    endpoint: ServiceEndpoint
    interface: Callable[[], str | None] | None = None
