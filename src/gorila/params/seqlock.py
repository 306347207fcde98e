"""The node's copy of the parameters in shared memory: one writer (the node's parameter cache),
many readers (its actors), no locks::

    buf = SeqlockBuffer.create(name, size); buf.write(flat, version)    # the cache
    SeqlockBuffer.attach(name, size).read(out)                          # an actor

The segment is named, so a restarted cache takes over the one its predecessor left, and the
writer alone removes it: no process's resource tracker removes it when that process exits.

A copy is taken as consistent only when it matches the checksum the writer stored after the data,
not by the order in which the writer's stores become visible: a CPU that may make them visible in
another order (aarch64: Graviton, Ampere, Apple silicon) is as safe as one that keeps them (x86).
"""

from __future__ import annotations

import os
import time
from multiprocessing import resource_tracker, shared_memory

import numpy as np

# Header slots (int64): the sequence counter (odd while a write is under way), the version in the
# buffer, the newest version the cache saw upstream at its last probe, the cache's heartbeat
# (CLOCK_MONOTONIC ns, the same clock in every process of a node), and the checksum of the vector
# and its version (an aligned 8-byte slot: one store, one load, whole on x86-64 and aarch64 alike).
_SEQ, _VERSION, _UPSTREAM, _BEAT, _CHECK = range(5)
_HEADER_BYTES = 64  # one cache line: the vector starts aligned
#: Mixes the version into the checksum (2**64 / the golden ratio): a version read from one write and
#: a vector from another fail it as a vector read from two writes does.
_VERSION_MIX = 0x9E3779B97F4A7C15
_WORDS = 1 << 64
#: How long a reader tries for a consistent copy before it gives up (a writer that died mid-write).
READ_TIMEOUT_S = 1.0


def checksum(data: np.ndarray, version: int) -> int:
    """The checksum a consistent copy of ``data`` (a contiguous float32 vector) at ``version`` has:
    its 8-byte words summed modulo 2**64, the version mixed in. A copy that mixes two writes sums the
    words that differ between them from both, which matches either write's checksum only by a chance
    of 2**-64; it costs one read of the vector, half a copy (docs/benchmarks.md)."""
    pairs = data.size // 2
    total = int(np.add.reduce(data[:2 * pairs].view(np.uint64), dtype=np.uint64)) if pairs else 0
    if data.size % 2:
        total += int(data[-1:].view(np.uint32)[0])
    return (total + (version + 2) * _VERSION_MIX) % _WORDS


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

    The writer makes the sequence counter odd, writes the vector, then its version and checksum,
    and makes the counter even again; a reader copies between two reads of the counter and keeps
    the copy only when both are the same even number and the copy has the checksum stored beside it
    (:func:`checksum`), else it copies again, for at most ``timeout_s`` (then -1, as for nothing
    written). The counter spares a reader copies it would throw away; the checksum alone decides,
    whatever order the CPU makes the writer's stores visible in.
    """

    def __init__(self, shm: shared_memory.SharedMemory, size: int, owner: bool):
        self.shm, self.size, self.owner = shm, size, owner
        self.name = shm.name
        self._head = np.ndarray((5,), np.int64, shm.buf, 0)
        self._check = np.ndarray((1,), np.uint64, shm.buf, 8 * _CHECK)
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
        buf._head[:4] = (0, -1, -1, time.monotonic_ns())
        buf._check[0] = checksum(buf._data, -1)
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
        self._check[0] = checksum(self._data, version)  # of what was stored, after it
        self._head[_SEQ] = seq + 2

    def read(self, out: np.ndarray, timeout_s: float = READ_TIMEOUT_S) -> int:
        """Copy the vector into ``out`` (contiguous float32); its version, or -1 for nothing
        written yet or no consistent copy within ``timeout_s`` (a writer that died mid-write)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            before = int(self._head[_SEQ])
            if before & 1:
                os.sched_yield()  # a write is under way
                continue
            version, check = int(self._head[_VERSION]), int(self._check[0])
            np.copyto(out, self._data)
            if int(self._head[_SEQ]) == before and checksum(out, version) == check:
                return version
        return -1

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
        del self._head, self._check, self._data  # views first: the mapping cannot close while they exist
        self.shm.close()
        if self.owner:
            _unlink(self.shm)
