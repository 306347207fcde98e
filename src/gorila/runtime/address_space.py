"""Ray under a limited address space (``ulimit -v``, ``prlimit --as``): its object store sized to fit,
or the limit named.

Ray maps its whole object store (by default 30 % of the machine's memory) into every process of a
run, the driver's included, beside the process's own memory (Python, PyTorch, Ray's threads: under
1 GiB measured for an actor), and into its raylet twice (as the store and as a client of it). A
limit below that made the raylet or the driver crash as they mapped it (``mmap failed``, in Ray's C++
core), with no word of why. So the embedded Ray gets a store of a quarter of the limit, and a limit
too small for any store is refused by name before Ray starts::

    store = object_store_bytes()        # None: no limit, Ray's own default; else bytes that fit
    limited()                           # "limited to 8.0 GiB of address space (ulimit -v)", or ""
"""

from __future__ import annotations

import os
import resource

from gorila.errors import SchedulingError

#: The share of a limited address space given to the object store: the raylet maps it twice, and
#: needs as much again for its own.
STORE_SHARE = 0.25
#: Ray's own default object store: this share of the machine's memory.
RAY_STORE_SHARE = 0.3
#: The least address space Ray's processes started in (a3c on CartPole: 3 GiB ran, 2 GiB crashed).
LEAST_BYTES = 3 << 30

_GIB = float(1 << 30)


def address_space_limit() -> int | None:
    """This process's address space limit in bytes (inherited by every process it starts), or None."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else soft


def limited() -> str:
    """The limit in words, for an error that it may explain; '' without one."""
    limit = address_space_limit()
    return "" if limit is None else f"limited to {limit / _GIB:.1f} GiB of address space (ulimit -v, prlimit --as)"


def object_store_bytes() -> int | None:
    """The embedded Ray's object store under this process's limit: None (Ray's default) without
    one; else a quarter of it, at most Ray's default. A limit under :data:`LEAST_BYTES` is a
    :class:`SchedulingError` naming it and what to do."""
    limit = address_space_limit()
    if limit is None:
        return None
    if limit < LEAST_BYTES:
        raise SchedulingError(f"Ray cannot start here: this process is {limited()}, which Ray's processes "
                              f"inherit, and they need {LEAST_BYTES / _GIB:.0f} GiB of it at least (Ray maps its "
                              "object store into each of them beside their own memory). Raise the limit (ulimit -v "
                              "unlimited) or train in this process (--runtime local)")
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return int(min(limit * STORE_SHARE, memory * RAY_STORE_SHARE))
