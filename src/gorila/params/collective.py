"""The learners' process group: ``torch.distributed`` on the gloo backend, met through the run's
:class:`~gorila.params.rendezvous.Rendezvous`, every collective bounded by a timeout::

    group = Collective.join(spec, rank=k, world=2, timeout_s=60.0)   # blocks until both have joined
    group.sum(array)          # in place: the sum over the group, the same bytes on every member
    group.close()

A member that joins again (its process restarted) joins a new *generation*: the rendezvous counts
joins, and the ``world`` joins of one generation meet under their own keys. A collective that
fails (a member died: gloo sees its sockets close; or one stopped taking part: the timeout) is a
:class:`CollectiveLostError`; a group cannot heal a missing member, so the caller ends its process
and the runtime restarts it, as it restarts any worker (see :mod:`gorila.params.replicas`).
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from gorila.errors import GorilaError
from gorila.params.rendezvous import RendezvousSpec
from gorila.reply import ServiceEndpoint

#: How often a member waiting for a key asks the rendezvous again, first and at most.
POLL_S = (0.001, 0.05)


class CollectiveLostError(GorilaError, ConnectionError):
    """The learners' process group broke: a member died or stopped taking part."""


class RendezvousStore(dist.Store):  # type: ignore[name-defined, misc]  # torch's stores are untyped
    """A ``torch.distributed`` store over the run's rendezvous service (what ``init_process_group``
    exchanges the members' addresses through); a wait gives up after ``timeout_s``."""

    def __init__(self, endpoint: ServiceEndpoint, timeout_s: float):
        super().__init__()
        self.endpoint, self.timeout_s = endpoint, timeout_s

    def _call(self, method: str, *args: Any) -> Any:
        return self.endpoint.call(method, *args).result(self.timeout_s)

    def set(self, key: str, value: bytes | str) -> None:
        self._call("set", key, value.encode() if isinstance(value, str) else bytes(value))

    def get(self, key: str) -> bytes:
        self.wait([key])
        value: bytes = self._call("get", key)
        return value

    def add(self, key: str, amount: int) -> int:
        value: int = self._call("add", key, amount)
        return value

    def compare_set(self, key: str, expected: bytes | str, desired: bytes | str) -> bytes:
        def raw(v: bytes | str) -> bytes:
            return v.encode() if isinstance(v, str) else bytes(v)
        value: bytes = self._call("compare_set", key, raw(expected), raw(desired))
        return value

    def check(self, keys: list[str]) -> bool:
        found: bool = self._call("check", list(keys))
        return found

    def wait(self, keys: list[str], timeout: datetime.timedelta | None = None) -> None:
        limit = self.timeout_s if timeout is None else timeout.total_seconds()
        deadline, pause = time.monotonic() + limit, POLL_S[0]
        while not self.check(keys):
            if time.monotonic() > deadline:
                raise CollectiveLostError(f"the learners' rendezvous waited {limit:.0f} s for {keys}: "
                                          "a learner did not join")
            time.sleep(pause)  # the service cannot block for us: it answers one call at a time
            pause = min(pause * 2, POLL_S[1])

    def delete_key(self, key: str) -> bool:
        deleted: bool = self._call("delete", key)
        return deleted

    def num_keys(self) -> int:
        keys: int = self._call("count")
        return keys


class Collective:
    """One member's side of the process group (one per process: torch's default group)."""

    def __init__(self, store: Any, rank: int, world: int, timeout_s: float, interface: str | None = None):
        if interface is not None:
            # gloo listens on this interface only: loopback on one machine, the node's on a cluster.
            os.environ["GLOO_SOCKET_IFNAME"] = interface
        self.rank, self.world, self.timeout_s = rank, world, timeout_s
        try:
            dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                                    timeout=datetime.timedelta(seconds=timeout_s))
        except (RuntimeError, dist.DistError) as err:
            raise CollectiveLostError(f"learner {rank} could not meet the other {world - 1} within "
                                      f"{timeout_s:.0f} s: {err}") from err

    @classmethod
    def join(cls, spec: RendezvousSpec, rank: int, world: int, timeout_s: float) -> Collective:
        """Meet the other members of this generation through the run's rendezvous."""
        store = RendezvousStore(spec.endpoint, timeout_s)
        generation = (store.add("joined", 1) - 1) // world
        interface = spec.interface() if spec.interface is not None else None
        prefixed = dist.PrefixStore(f"generation-{generation}", store)  # type: ignore[attr-defined]
        return cls(prefixed, rank, world, timeout_s, interface)

    def sum(self, array: np.ndarray) -> np.ndarray:
        """``array`` (C-contiguous) replaced by its sum over the members, in place."""
        return self._reduce(array, dist.ReduceOp.SUM)

    def max(self, array: np.ndarray) -> np.ndarray:
        """``array`` replaced by its elementwise maximum over the members, in place."""
        return self._reduce(array, dist.ReduceOp.MAX)

    def _reduce(self, array: np.ndarray, op: Any) -> np.ndarray:
        try:
            dist.all_reduce(torch.from_numpy(array), op=op)
        except (RuntimeError, dist.DistError) as err:
            raise CollectiveLostError(f"learner {self.rank}'s all-reduce with the other {self.world - 1} failed "
                                      f"(a learner died, or took no part for {self.timeout_s:.0f} s): {err}") from err
        return array

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


def end_process(error: CollectiveLostError) -> None:
    """What a learner does when its group is lost: say why and end its process (exit code 75,
    EX_TEMPFAIL), which the runtime restarts and whose call it retries (Ray: ``max_restarts``,
    ``max_task_retries``); every member ends alike, and all rebuild their replicas from the store."""
    os.write(2, f"gorila: {error}; ending this learner's process so that the group starts again\n".encode())
    os._exit(75)


#: The signature of what a learner does with a lost group (:func:`end_process`; tests pass their own).
OnLost = Callable[[CollectiveLostError], None]
