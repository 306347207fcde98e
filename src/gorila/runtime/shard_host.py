"""One parameter shard shared by several threads of a shard process, with the barrier wait.

A shard process serves Ray calls on its asyncio loop and same-node clients on threads of the
fast path (:mod:`gorila.runtime.shm`). All of them reach the shard through one
:class:`ShardHost`: a lock makes each push, pull and state read whole, and a synchronous
push waits, with the lock released, until the version it completes exists. No Ray here::

    host = ShardHost(shard, barrier_timeout_s=600, on_advance=wake_loop_waiters)
    result = host.push(grad, version, worker_id)             # a thread: blocks at a barrier
    result = host.push(grad, version, worker_id, wait=False)  # the event loop: never blocks...
    if host.must_wait(result, version):                      # ...but waits for the version
        ...                                                  # (on_advance signals each new one)
        result = host.refreshed(result)                      # then takes the fresh parameters
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

import numpy as np

from gorila.errors import WorkerTimeoutError
from gorila.params import ParameterShard, PushResult, PushTag


class ShardHost:
    """Thread-safe access to a :class:`ParameterShard` (see the module doc).

    ``on_advance`` is called, with the lock held, every time the shard's version moves on;
    it must not block (the Ray shard process uses it to wake waiters on its event loop).
    """

    def __init__(self, shard: ParameterShard, barrier_timeout_s: float,
                 on_advance: Callable[[], None] | None = None):
        self.shard = shard
        self.barrier_timeout_s = barrier_timeout_s
        self._on_advance = on_advance
        self._changed = threading.Condition()

    @property
    def version(self) -> int:
        return self.shard.version

    @property
    def size(self) -> int:
        return self.shard.size

    def push(self, grad: np.ndarray, version: int, worker_id: int, out: np.ndarray | None = None,
             wait: bool = True, tag: PushTag | None = None) -> PushResult:
        """:meth:`ParameterShard.push`. Under a barrier rule, a push that joined version
        ``version + 1`` without completing it returns once that version exists (``wait``), with
        its parameters; a push rejected as stale returns at once, with fresh parameters."""
        with self._changed:
            result = self.shard.push(grad, version, worker_id, out=out, tag=tag)
            if result.applied:
                self._changed.notify_all()
                if self._on_advance is not None:
                    self._on_advance()
            if not (wait and self.must_wait(result, version)):
                return result
            if not self._changed.wait_for(lambda: self.shard.version > version, self.barrier_timeout_s):
                raise self.barrier_timeout(version, worker_id)
            return self._with_params(result, out, tag)

    def must_wait(self, result: PushResult, version: int) -> bool:
        """Whether the pusher must wait at the barrier for the version after ``version``."""
        return self.shard.rule.barrier and result.outcome != "rejected" and result.version <= version

    def refreshed(self, result: PushResult, out: np.ndarray | None = None, tag: PushTag | None = None) -> PushResult:
        """``result`` with the shard's current version and (unless ``tag`` asks for none) parameters,
        after a barrier wait."""
        with self._changed:
            return self._with_params(result, out, tag)

    def barrier_timeout(self, version: int, worker_id: int) -> WorkerTimeoutError:
        return WorkerTimeoutError(
            f"shard {self.shard.shard_id}: worker {worker_id} waited {self.barrier_timeout_s:.0f} s at the "
            f"barrier of version {version + 1}; a worker stopped pushing")

    def pull(self, out: np.ndarray | None = None) -> tuple[np.ndarray, int]:
        with self._changed:
            return self.shard.pull(out=out)

    def current(self) -> tuple[np.ndarray, int]:
        """:meth:`ParameterShard.current`: a copy for the caches subscribed to the shard."""
        with self._changed:
            return self.shard.current()

    def publish(self, state: dict[str, np.ndarray]) -> None:
        """:meth:`ParameterShard.publish`: an owning learner's new version, which wakes whoever
        waits for one."""
        with self._changed:
            self.shard.publish(state)
            self._changed.notify_all()
            if self._on_advance is not None:
                self._on_advance()

    @contextmanager
    def locked(self) -> Iterator[ParameterShard]:
        """The shard, with no push or pull running until the block ends (for stats and state)."""
        with self._changed:
            yield self.shard

    def _with_params(self, result: PushResult, out: np.ndarray | None, tag: PushTag | None) -> PushResult:
        if tag is not None and not tag.reply_params:  # the pusher reads its node's cache
            return replace(result, version=self.shard.version)
        params, current = self.shard.pull(out=out)
        return replace(result, version=current, params=params)
