"""Sample the next minibatches on a background thread while the learner computes on this one."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from gorila import validate
from gorila.errors import WorkerTimeoutError

T = TypeVar("T")

# How often a blocked producer wakes up to see whether it was closed.
_POLL_S = 0.05


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


class Prefetcher(Generic[T]):
    """Keeps up to ``depth`` results of ``sample_fn()`` ready (a bounded queue, so it never runs ahead)::

        with Prefetcher(lambda: storage.sample(32, rng), depth=2) as batches:
            for _ in range(steps):
                batch = batches.next(timeout_s=10.0)   # WorkerTimeoutError if none arrives in time

    ``sample_fn`` runs on the prefetch thread: if it shares state with other threads (a replay
    that actors add to), guard both sides with a lock. An exception raised by ``sample_fn`` stops
    the thread and is raised again by every later :meth:`next`.
    """

    def __init__(self, sample_fn: Callable[[], T], depth: int = 2):
        validate.integer("prefetch_depth", depth, low=1)
        self._sample_fn = sample_fn
        self._queue: queue.Queue[T | _Failure] = queue.Queue(maxsize=depth)
        self._closed = threading.Event()
        self._failure: _Failure | None = None
        self._thread = threading.Thread(target=self._run, name="gorila-prefetch", daemon=True)
        self._thread.start()

    def next(self, timeout_s: float) -> T:
        if self._failure is not None:
            raise self._failure.error
        if self._closed.is_set():
            raise RuntimeError("Prefetcher is closed")
        try:
            item = self._queue.get(timeout=timeout_s)
        except queue.Empty:
            raise WorkerTimeoutError(f"no minibatch was ready within {timeout_s} s") from None
        if isinstance(item, _Failure):
            self._failure = item
            raise item.error
        return item

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the thread; a ``sample_fn`` call in progress is allowed to finish."""
        self._closed.set()
        self._thread.join(timeout_s)

    def __enter__(self) -> Prefetcher[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        while not self._closed.is_set():
            try:
                item = self._sample_fn()
            except BaseException as e:  # handed to the consumer, which re-raises it
                self._put(_Failure(e))
                return
            self._put(item)

    def _put(self, item: T | _Failure) -> None:
        while not self._closed.is_set():
            try:
                self._queue.put(item, timeout=_POLL_S)
                return
            except queue.Full:
                continue
