"""The node's copy of the parameters in shared memory: one writer (the node's parameter cache),
many readers (its actors), no locks::

    buf = SeqlockBuffer.create(name, size); buf.write(flat, version)    # the cache
    SeqlockBuffer.attach(name, size).read(out)                          # an actor

The segment is named, so a restarted cache takes over the one its predecessor left, and the
writer alone removes it: no process's resource tracker removes it when that process exits.
"""

from __future__ import annotations

import os
import time
from multiprocessing import resource_tracker, shared_memory

import numpy as np

# Header slots (int64): the sequence counter (odd while a write is under way), the version in the
# buffer, the newest version the cache saw upstream at its last probe, and the cache's heartbeat
# (CLOCK_MONOTONIC ns, the same clock in every process of a node).
_SEQ, _VERSION, _UPSTREAM, _BEAT = range(4)
_HEADER_BYTES = 64  # one cache line: the vector starts aligned


def _tracked_name(shm: shared_memory.SharedMemory) -> str:
    """The name the resource tracker knows a segment by: ``shm.name`` with the leading slash that
    POSIX names carry and ``shm.name`` drops."""
    return "/" + shm.name


def _unlink(shm: shared_memory.SharedMemory) -> None:
    """Remove the segment's name, telling the resource tracker nothing it has not been told.
    ``SharedMemory.unlink()`` also unregisters the segment from the tracker, which ``create()`` did
    already (a second unregister makes the tracker print a KeyError): it is registered again first.
    A segment already gone is only unregistered."""
    resource_tracker.register(_tracked_name(shm), "shared_memory")
    try:
        shm.unlink()
    except FileNotFoundError:
        resource_tracker.unregister(_tracked_name(shm), "shared_memory")


class SeqlockBuffer:
    """A float32 vector and its version in named shared memory (mode 0600), written by one process
    and read by many without locks::

        buf = SeqlockBuffer.create("gorila-ab12-node3", size)   # the writer (the cache)
        buf.write(flat, version)
        reader = SeqlockBuffer.attach("gorila-ab12-node3", size)
        version = reader.read(out)                              # never a half-written vector

    The writer makes the sequence counter odd, writes, and makes it even again; a reader copies
    between two reads of the counter and retries unless both are the same even number. (x86 keeps
    stores in program order, which this relies on.)
    """

    def __init__(self, shm: shared_memory.SharedMemory, size: int, owner: bool):
        self.shm, self.size, self.owner = shm, size, owner
        self.name = shm.name
        self._head = np.ndarray((4,), np.int64, shm.buf, 0)
        self._data = np.ndarray((size,), np.float32, shm.buf, _HEADER_BYTES)

    @classmethod
    def create(cls, name: str, size: int) -> SeqlockBuffer:
        """A new buffer (version -1: nothing yet). One left by a writer that crashed is taken over."""
        nbytes = _HEADER_BYTES + 4 * size
        try:
            shm = shared_memory.SharedMemory(name, create=True, size=nbytes)  # CPython creates it 0600
        except FileExistsError:
            shm = shared_memory.SharedMemory(name)
            if shm.size < nbytes:
                shm.close()
                shm.unlink()  # attaching registered it with the tracker, and this unregisters it
                shm = shared_memory.SharedMemory(name, create=True, size=nbytes)
        # The owner unlinks it in close(); Python's resource tracker would also unlink it when this
        # process dies, possibly under a restarted cache that took the name over.
        resource_tracker.unregister(_tracked_name(shm), "shared_memory")
        buf = cls(shm, size, owner=True)
        buf._head[:] = (0, -1, -1, time.monotonic_ns())
        return buf

    @classmethod
    def attach(cls, name: str, size: int) -> SeqlockBuffer:
        """A reader's view of an existing buffer; FileNotFoundError when there is none."""
        shm = shared_memory.SharedMemory(name)
        resource_tracker.unregister(_tracked_name(shm), "shared_memory")  # a reader must never unlink it
        if shm.size < _HEADER_BYTES + 4 * size:
            shm.close()
            raise ValueError(f"shared memory {name} holds fewer than {size} parameters")
        return cls(shm, size, owner=False)

    def write(self, flat: np.ndarray, version: int) -> None:
        seq = int(self._head[_SEQ])
        self._head[_SEQ] = seq + 1
        np.copyto(self._data, flat)
        self._head[_VERSION] = version
        self._head[_SEQ] = seq + 2

    def read(self, out: np.ndarray) -> int:
        """Copy the vector into ``out``; its version (-1: nothing written yet)."""
        while True:
            before = int(self._head[_SEQ])
            if before & 1:
                os.sched_yield()  # a write is under way
                continue
            version = int(self._head[_VERSION])
            np.copyto(out, self._data)
            if int(self._head[_SEQ]) == before:
                return version

    @property
    def version(self) -> int:
        return int(self._head[_VERSION])

    @property
    def upstream_version(self) -> int:
        return int(self._head[_UPSTREAM])

    def beat(self, upstream_version: int | None = None) -> None:
        """Say the writer is alive and (when given) what version it saw upstream (aligned 8-byte stores)."""
        if upstream_version is not None:
            self._head[_UPSTREAM] = upstream_version
        self._head[_BEAT] = time.monotonic_ns()

    def age_s(self) -> float:
        """Seconds since the writer's last heartbeat."""
        return (time.monotonic_ns() - int(self._head[_BEAT])) / 1e9

    def close(self) -> None:
        if self.owner:
            self._head[_BEAT] = 0  # readers that still map it see a writer long dead
        del self._head, self._data  # views first: the mapping cannot close while they exist
        self.shm.close()
        if self.owner:
            _unlink(self.shm)
