"""Replies to calls that may cross a process: :class:`Pending` (the protocol every call returns) and
:class:`Done` (a reply already here). A leaf: it imports nothing from gorila, so every layer may use
it — the roles in :mod:`gorila.core`, the parameter server's client, the replay's client, the
runtimes — without an import running back up.

::

    pending = replay.sample(32)
    batch = pending.result(timeout_s=10.0)   # WorkerTimeoutError if it does not come in time
    Done(batch).result(timeout_s=0.0)        # an in-process call's reply: the value at once
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

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
