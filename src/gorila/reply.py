"""Replies to calls that may cross a process: :class:`Pending` (the protocol every call returns),
:class:`Done` (a reply already here), and :class:`ServiceEndpoint` (the transport that makes such calls
to one service). A leaf: it imports nothing from gorila, so every layer may use
it — the roles in :mod:`gorila.core`, the parameter server's client, the replay's client, the
runtimes — without an import running back up.

::

    pending = replay.sample(32)
    batch = pending.result(timeout_s=10.0)   # WorkerTimeoutError if it does not come in time
    Done(batch).result(timeout_s=0.0)        # an in-process call's reply: the value at once
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Pending(Protocol[T_co]):
    """A reply that may still be on its way::

        pending = replay.sample(32)
        if pending.ready(): ...                  # without waiting
        batch = pending.result(timeout_s=10.0)   # WorkerTimeoutError if it does not come in time
    """

    def result(self, timeout_s: float) -> T_co: ...
    def ready(self) -> bool: ...


@dataclass(frozen=True)
class Done(Generic[T]):
    """A reply that is already here (in-process calls): ``Done(value).result(timeout_s)`` is ``value``."""

    value: T

    def result(self, timeout_s: float) -> T:
        return self.value

    def ready(self) -> bool:
        return True

class ServiceEndpoint(Protocol):
    """The transport to one service (picklable). Typed clients such as ``replay.RemoteReplay``
    wrap it; users never call it by method name themselves."""

    def call(self, method: str, *args: Any) -> Pending[Any]: ...
