"""MapReduce (the textbook's §12.1.2, docs/algorithms.md#sources): a map function over data shards
held by workers, and the chapter's reductions ``sum``, ``mean`` and ``count``, on either runtime.

The server broadcasts the same arguments to every worker; each worker maps its rows and reduces
them locally (the combiner); the server reduces the workers' partial results::

    job = MapReduce(make_runtime("local"), shard_factory, count=4)   # or make_runtime("ray")
    mu = job.run(rows_of, "mean")                                     # mean of every row
    var = job.run(squared_deviation, "mean", mu)                      # broadcast mu, map, reduce
    n = job.run(rows_of, "count")

``shard_factory(k)`` builds shard ``k``'s :class:`DataShard` inside its worker's process, so the
rows never travel; only the broadcast arguments and one :class:`Partial` per worker do. A map
function is ``fn(*arrays, *args)``: the shard's arrays (rows along axis 0) first, then the
broadcast arguments. It returns one value per row (rows along axis 0), or, where a product sums
its rows faster than they could be listed, their :class:`Partial` already (in-mapper combining:
least squares' ``X^T (Xw - y)`` is one matrix product). Map functions and shard factories cross to
Ray processes: module-level functions or ``functools.partial`` of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gorila import validate
from gorila.core import Runtime, ServiceGroup

#: The reductions of the textbook's Figure 12.3: the sum of the mapped values, their mean, their number.
COMBINERS = ("sum", "mean", "count")

MapFn = Callable[..., "np.ndarray | Partial"]


@dataclass(frozen=True)
class Partial:
    """What a worker sends the server: the sum of its mapped values and how many there were. Every
    combiner reduces partials by adding them, and differs only in :func:`finish`."""

    total: np.ndarray
    count: int

    def __add__(self, other: Partial) -> Partial:
        return Partial(self.total + other.total, self.count + other.count)

    @classmethod
    def of(cls, values: np.ndarray | Partial) -> Partial:
        """The local reduction of one value per row (a map's output), or a map's own partial."""
        if isinstance(values, Partial):
            return values
        values = np.asarray(values)
        return cls(values.sum(axis=0), len(values))


def finish(combiner: str, partial: Partial) -> Any:
    """The result a ``combiner`` makes of the partials' sum: ``sum`` the total, ``mean`` the
    total over the count, ``count`` the count."""
    validate.choice("combiner", combiner, COMBINERS)
    if combiner == "count":
        return partial.count
    if combiner == "mean":
        if partial.count == 0:
            raise ValueError("the mean of no values")
        return partial.total / partial.count
    return partial.total


def reduce(combiner: str, partials: Iterable[Partial]) -> Any:
    """The server's reduction of the workers' partials."""
    parts = list(partials)
    if not parts:
        raise ValueError("nothing to reduce")
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return finish(combiner, total)


class DataShard:
    """The rows one worker holds (several arrays of equal length, e.g. features and labels), and
    its map with the local reduction::

        shard = DataShard(x, y)
        part = shard.map(residual_gradient, w)        # a Partial: sent to the server
        g = shard.map_reduce(residual_gradient, "sum", w)
    """

    def __init__(self, *arrays: np.ndarray):
        if not arrays:
            raise ValueError("a data shard holds at least one array")
        lengths = {len(a) for a in arrays}
        if len(lengths) != 1:
            raise ValueError(f"the arrays of a data shard must have as many rows each, got {sorted(lengths)}")
        self.arrays = arrays

    def __len__(self) -> int:
        return len(self.arrays[0])

    def map(self, fn: MapFn, *args: Any) -> Partial:
        """Map ``fn`` over this shard's rows (with the broadcast ``args``) and reduce them locally."""
        return Partial.of(fn(*self.arrays, *args))

    def map_reduce(self, fn: MapFn, combiner: str, *args: Any) -> Any:
        """This shard alone as the whole data set: its map, then ``combiner``'s result."""
        return finish(combiner, self.map(fn, *args))


class MapReduce:
    """Data shards held by workers of a runtime (a group of its services: local objects, or Ray
    processes), and jobs over them; see the module doc. ``close()`` is the caller's runtime's
    ``shutdown``: the shards live as long as the runtime."""

    def __init__(self, runtime: Runtime, shard_factory: Callable[[int], DataShard], count: int,
                 name: str = "data"):
        validate.integer("count", count, low=1)
        self.count = count
        self.group: ServiceGroup = runtime.start_services(shard_factory, count, name=name)

    def partials(self, fn: MapFn, *args: Any) -> list[Partial]:
        """Every worker's partial of ``fn`` (``args`` broadcast to all), in shard order."""
        return list(self.group.call("map", fn, *args))

    def run(self, fn: MapFn, combiner: str, *args: Any) -> Any:
        """Broadcast ``args``, map ``fn`` on every worker's shard, reduce with ``combiner``."""
        validate.choice("combiner", combiner, COMBINERS)
        return reduce(combiner, self.partials(fn, *args))


def rows_of(first: np.ndarray, *rest: Any) -> np.ndarray:
    """The map that hands on the first array's rows as they are (for a mean or a count of rows)."""
    return first
